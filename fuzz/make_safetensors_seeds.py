#!/usr/bin/env python3
"""Writes the safetensors seed corpus (fuzz/corpus/safetensors/): small files in
the real format (8-byte little-endian header length, JSON header, data) plus
broken ones. Run again after changing it; the outputs are committed."""
import json
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "safetensors")


def safetensors(header, data=b"", length=None):
    text = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(text) if length is None else length) + text + data


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {
        "one-tensor": safetensors(
            {"w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]}}, bytes(range(12))),
        "metadata": safetensors(
            {"__metadata__": {"format": "pt"},
             "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
             "b": {"dtype": "F16", "shape": [4], "data_offsets": [8, 16]}}, bytes(16)),
        "empty-header": safetensors({}),
        "zero-size-tensor": safetensors({"z": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}}),
        "length-larger-than-file": safetensors({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}},
                                               bytes(4), length=1 << 40),
        "offsets-outside-data": safetensors({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 1024]}}, bytes(4)),
        "offsets-reversed": safetensors({"w": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}}, bytes(8)),
        "negative-shape": safetensors({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, bytes(4)),
        "header-array": safetensors([1, 2, 3]),
        "header-not-json": struct.pack("<Q", 5) + b"{nope" + bytes(3),
        "short": b"\x05\x00\x00",
        "u64-offsets": safetensors({"w": {"dtype": "U8", "shape": [1],
                                          "data_offsets": [18446744073709551615, 18446744073709551615]}}),
    }
    for name, blob in seeds.items():
        with open(os.path.join(OUT, name + ".safetensors"), "wb") as f:
            f.write(blob)


if __name__ == "__main__":
    main()
