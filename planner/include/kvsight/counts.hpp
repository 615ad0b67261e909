#pragma once
// The one grammar for counts typed by a user (every command's flags, comma lists).
// Decimal digits only, optionally one suffix K or M (x 1024): "32768", "32K", "1M".
// Leading zeros are decimal ("010" is 10, never octal); a sign, hex ("0x10"), spaces,
// an empty value and anything beyond 2^64 - 1 are refused. CLI11 alone would read
// "010" as 8 and "0x10" as 16, wrap "-1" to 2^64 - 1 and saturate huge values.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvsight {

// Throws InputError(field, ...) naming the value and the grammar.
std::uint64_t parse_count(std::string_view text, std::string_view field);

// parse_count, then min <= value <= max (message names the range).
std::uint64_t parse_count_in(std::string_view text, std::string_view field, std::uint64_t min,
                             std::uint64_t max);

// Comma-separated counts, each in [min, max]; empty items and an empty list are refused.
std::vector<std::uint64_t> parse_count_list(std::string_view text, std::string_view field, std::uint64_t min,
                                            std::uint64_t max);

// The one grammar for byte sizes typed by a user (probe --bytes, --max-mem): decimal
// digits, optionally a fraction (".5"), optionally one unit right after them: B; KiB,
// MiB, GiB, TiB (x 2^10, 2^20, 2^30, 2^40); KB, MB, GB, TB (x 10^3 .. 10^12). "512MiB",
// "1.5GiB", "4096". A fraction of a byte is dropped (rounded down to whole bytes). A
// sign, an exponent, hex (floats), inf, nan, spaces, an empty value, more than 18
// fraction digits and anything beyond 2^64 - 1 bytes are refused: std::stod would read
// "0x1p4" as 16, "1e3" as 1000 and "-0" or "nan" as numbers.
std::uint64_t parse_byte_size(std::string_view text, std::string_view field);

// The same grammar without a unit, counting GiB (2^30 bytes): "80", "23.5"
// (--gpu-mem-gib); returns bytes, rounded down.
std::uint64_t parse_gib(std::string_view text, std::string_view field);

// A finite decimal number (no nan, inf, hex floats), min <= value <= max; `allowed`
// says the range in words for the message ("a fraction in (0, 1]").
double parse_number_in(std::string_view text, std::string_view field, double min, double max,
                       std::string_view allowed);

}  // namespace kvsight
