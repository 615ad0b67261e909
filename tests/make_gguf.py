#!/usr/bin/env python3
"""Writes GGUF files for tests/test_gguf.cpp with the `gguf` package (llama.cpp's
own writer, gguf-py), header and tensor infos real, tensor data a sparse hole
(the file is truncated to its full size, so a 2 GB file costs no disk).

usage: make_gguf.py OUT.gguf tinyllama|tinyllama-f16|split|mla-old|mla-new|jamba|falcon-h1|gpt-oss|tiny-ARCH
(tinyllama: linears q8_0; tinyllama-f16: every matrix f16, 2.2 GB)
Exits 3 with a message when the gguf package is missing (scripts/setup.sh installs it).
"""
import os
import sys

try:
    import numpy as np
    import gguf
except ImportError as e:  # the C++ test turns this into a failure naming setup.sh
    sys.stderr.write(f"make_gguf.py: {e}; run scripts/setup.sh (it pip-installs gguf)\n")
    sys.exit(3)

Q = gguf.GGMLQuantizationType


def tinyllama(w, layers=22, linear=Q.Q8_0):
    # TinyLlama-1.1B-Chat-v1.0 config.json: hidden 2048, 22 layers, 32 heads,
    # 4 KV heads, intermediate 5632, vocab 32000, 2048 positions, rope theta 10000.
    w.add_block_count(layers)
    w.add_context_length(2048)
    w.add_embedding_length(2048)
    w.add_feed_forward_length(5632)
    w.add_head_count(32)
    w.add_head_count_kv(4)
    w.add_rope_freq_base(10000.0)
    w.add_rope_dimension_count(64)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(32000)
    w.add_string("general.name", "TinyLlama-1.1B shape")
    # A real tokenizer array, so the reader skips a large string array.
    w.add_token_list([f"tok{i}" for i in range(32000)])
    tensors = [("token_embd.weight", (32000, 2048), Q.F16), ("output_norm.weight", (2048,), Q.F32),
               ("output.weight", (32000, 2048), linear)]
    for i in range(layers):
        p = f"blk.{i}."
        tensors += [(p + "attn_norm.weight", (2048,), Q.F32), (p + "ffn_norm.weight", (2048,), Q.F32),
                    (p + "attn_q.weight", (2048, 2048), linear), (p + "attn_k.weight", (256, 2048), linear),
                    (p + "attn_v.weight", (256, 2048), linear), (p + "attn_output.weight", (2048, 2048), linear),
                    (p + "ffn_gate.weight", (5632, 2048), linear), (p + "ffn_up.weight", (5632, 2048), linear),
                    (p + "ffn_down.weight", (2048, 5632), linear)]
    return tensors


def mla(w, new_layout):
    # DeepSeek-V2-Lite shape: hidden 2048, 27 layers, 16 heads, kv_lora_rank 512,
    # qk_nope 128, qk_rope 64, v_head_dim 128, no q_lora.
    w.add_block_count(2)
    w.add_context_length(163840)
    w.add_embedding_length(2048)
    w.add_feed_forward_length(10944)
    w.add_head_count(16)
    w.add_rope_dimension_count(64)
    w.add_kv_lora_rank(512)
    w.add_vocab_size(102400)
    if new_layout:  # llama.cpp PR #12801 converter
        w.add_head_count_kv(1)
        w.add_key_length(512 + 64)
        w.add_value_length(512)
        w.add_key_length_mla(128 + 64)
        w.add_value_length_mla(128)
    else:
        w.add_head_count_kv(16)
        w.add_key_length(128 + 64)
        w.add_value_length(128)
    return [("token_embd.weight", (102400, 2048), Q.F16)]


def jamba(w):
    # Jamba-style hybrid: 4 layers, attention where head_count_kv is non-zero.
    w.add_block_count(4)
    w.add_context_length(4096)
    w.add_embedding_length(1024)
    w.add_feed_forward_length(4096)
    w.add_head_count(8)
    w.add_head_count_kv([0, 0, 2, 0])
    w.add_vocab_size(1000)
    w.add_ssm_conv_kernel(4)
    w.add_ssm_inner_size(2048)
    w.add_ssm_state_size(16)
    w.add_ssm_time_step_rank(64)
    return [("token_embd.weight", (1000, 1024), Q.F16)]


def falcon_h1(w):
    # Falcon-H1 shape in small: one decoder layer of hidden 64 holding attention (4 heads,
    # 2 KV heads) and a Mamba-2 mixer (inner 128, 4 heads, 1 group, state 16) side by side.
    w.add_block_count(1)
    w.add_context_length(4096)
    w.add_embedding_length(64)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_vocab_size(32)
    w.add_ssm_conv_kernel(4)
    w.add_ssm_inner_size(128)
    w.add_ssm_state_size(16)
    w.add_ssm_time_step_rank(4)
    w.add_ssm_group_count(1)
    return [("token_embd.weight", (32, 64), Q.F16)]


def gpt_oss(w):
    # gpt-oss shape in small: two layers (sliding, full: llama.cpp's pattern of 2), 8 heads
    # of 64 over 2 KV heads, window 128; no sliding_window_pattern key, as convert_hf_to_gguf
    # writes it.
    w.add_block_count(2)
    w.add_context_length(4096)
    w.add_embedding_length(512)
    w.add_feed_forward_length(1024)
    w.add_head_count(8)
    w.add_head_count_kv(2)
    w.add_key_length(64)
    w.add_value_length(64)
    w.add_vocab_size(32)
    w.add_sliding_window(128)
    return [("token_embd.weight", (32, 512), Q.F16)]


def tiny(w, arch):
    # Small seeds for fuzz/corpus/gguf: one layer of hidden 64 with real (zero) data.
    w.add_block_count(1)
    w.add_context_length(256)
    w.add_embedding_length(64)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(2 if arch != "jamba" else [0])
    w.add_vocab_size(32)
    if arch == "deepseek2":
        w.add_rope_dimension_count(16)
        w.add_kv_lora_rank(32)
        w.add_key_length(48)
        w.add_value_length(32)
        w.add_key_length_mla(32)
        w.add_value_length_mla(16)
    if arch == "jamba":
        w.add_ssm_conv_kernel(4)
        w.add_ssm_inner_size(128)
        w.add_ssm_state_size(16)
        w.add_ssm_time_step_rank(4)
    if arch == "gemma2":
        w.add_sliding_window(128)
    return [("token_embd.weight", (32, 64), Q.F16), ("blk.0.attn_q.weight", (64, 64), Q.Q8_0),
            ("output_norm.weight", (64,), Q.F32)]


def main():
    out, variant = sys.argv[1], sys.argv[2]
    arch = {"tinyllama": "llama", "tinyllama-f16": "llama", "split": "llama", "mla-old": "deepseek2", "mla-new": "deepseek2",
            "jamba": "jamba", "tiny-llama": "llama", "tiny-deepseek2": "deepseek2", "tiny-jamba": "jamba",
            "tiny-gemma2": "gemma2", "falcon-h1": "falcon-h1", "gpt-oss": "gpt-oss"}[variant]
    split = 10 if variant == "split" else 0
    w = gguf.GGUFWriter(out, arch, split_max_tensors=split) if split else gguf.GGUFWriter(out, arch)
    if variant == "tinyllama-f16":
        tensors = tinyllama(w, 22, Q.F16)
    elif variant in ("tinyllama", "split"):
        tensors = tinyllama(w, 22 if variant == "tinyllama" else 2)
    elif variant.startswith("tiny-"):
        tensors = tiny(w, arch)
    elif variant == "falcon-h1":
        tensors = falcon_h1(w)
    elif variant == "gpt-oss":
        tensors = gpt_oss(w)
    elif variant.startswith("mla"):
        tensors = mla(w, variant == "mla-new")
    else:
        tensors = jamba(w)
    for name, shape, qtype in tensors:
        block, type_size = gguf.GGML_QUANT_SIZES[qtype]
        elements = int(np.prod(shape))
        w.add_tensor_info(name, shape, np.float32 if qtype == Q.F32 else np.float16,
                          elements // block * type_size, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    # The data section is a hole: each file truncated to offset of its data plus
    # the padded tensor sizes, as gguf-py would have written them.
    files = [f.name for f in w.fout] if isinstance(w.fout, list) else [w.fout.name]
    for f, tensors_of in zip(w.fout, w.tensors):
        f.flush()
        pos = f.tell()
        data = (pos + w.data_alignment - 1) // w.data_alignment * w.data_alignment
        total = 0
        for ti in tensors_of.values():
            total += (ti.nbytes + w.data_alignment - 1) // w.data_alignment * w.data_alignment
        f.truncate(data + total)
    w.close()
    print("\n".join(files))


if __name__ == "__main__":
    main()
