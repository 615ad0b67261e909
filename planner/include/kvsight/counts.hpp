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

// A finite decimal number (no nan, inf, hex floats), min <= value <= max; `allowed`
// says the range in words for the message ("a fraction in (0, 1]").
double parse_number_in(std::string_view text, std::string_view field, double min, double max,
                       std::string_view allowed);

}  // namespace kvsight
