// The disk tier's index of saved prefixes (KV save by name, docs/kv-cache.md "Saved
// prefixes"): <kv-disk-dir>/kv-pins.json names each saved token sequence, so a daemon
// restarted on the same dir knows which disk blocks a name's restore loads. The blocks
// themselves are the tier's ordinary block files (block_file.h). Parsed at start-up:
// anything malformed is refused whole with a reason (fuzzed: kv_pin_index).
//
//   {"version": 1, "pins": [{"name": "conv-7", "tokens": [1, 2, 3]}, ...]}
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::runtime {

struct SavedPrefix {
  std::string name;
  std::vector<int32_t> tokens;
  bool operator==(const SavedPrefix&) const = default;
};

inline constexpr size_t kMaxPinNameBytes = 256;

std::string encode_pin_index(std::span<const SavedPrefix> pins);
// nullopt (and *why) unless text is the format above: names 1..kMaxPinNameBytes bytes and
// unique, tokens non-negative int32.
std::optional<std::vector<SavedPrefix>> parse_pin_index(std::string_view text, std::string* why);

std::string pin_index_path(const std::string& disk_dir);
// Reads the dir's index; an absent file is no pins, a bad one is logged and ignored.
std::vector<SavedPrefix> read_pin_index(const std::string& disk_dir);
// Writes it (to a .tmp, then renamed); false, logged, if it cannot.
bool write_pin_index(const std::string& disk_dir, std::span<const SavedPrefix> pins);

}  // namespace troupe::runtime
