// Scalar values as they appear in a config file or on the command line: strict integers,
// booleans, byte sizes with units ("2GiB") and durations ("30s"). Each parser returns
// nullopt on anything it does not fully consume, so the caller can name the key.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace troupe::config {

// Decimal integer with an optional sign; no spaces, no units, no overflow.
std::optional<int64_t> parse_int(std::string_view s);

// true/false, yes/no, on/off, 1/0 (any case): YAML 1.1 words, as PyYAML reads vLLM configs.
std::optional<bool> parse_bool(std::string_view s);

// A whole number of bytes: "1073741824", "2GiB", "1.5 GiB", "512MB". Units (any case):
// B; KB MB GB TB (powers of 1000); KiB MiB GiB TiB (powers of 1024). A fraction is
// allowed if the result is whole bytes; computed exactly, not in floating point.
std::optional<int64_t> parse_bytes(std::string_view s);

// Seconds: "30", "2.5", "500ms", "30s", "5m", "1h". Finite and non-negative.
std::optional<double> parse_seconds(std::string_view s);

// The inverse of parse_bytes for display: the largest binary unit that divides exactly
// ("1GiB", "64MiB"), else plain bytes. parse_bytes(format_bytes(x)) == x.
std::string format_bytes(int64_t bytes);

// The candidate nearest to a misspelled name (edit distance <= 3; the first of equals),
// or "" when none is that near: the "did you mean" of config errors.
std::string nearest_name(std::string_view name, std::span<const std::string_view> candidates);

// Shortest text that reads back to the same double (plain seconds, no unit).
std::string format_seconds(double seconds);

}  // namespace troupe::config
