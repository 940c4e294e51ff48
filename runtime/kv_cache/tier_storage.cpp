#include "runtime/kv_cache/tier_storage.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "kernels/check.h"
#include "runtime/kv_cache/block_hash.h"

namespace troupe::runtime {
namespace fs = std::filesystem;

uint64_t kv_disk_model_tag(const model::ServingShape& m, int64_t block_size, int64_t block_bytes,
                           std::string_view mode) {
  std::vector<int64_t> shape = m.tag_head;
  shape.insert(shape.end(), {block_size, block_bytes});
  shape.insert(shape.end(), m.tag_tail.begin(), m.tag_tail.end());
  const uint64_t h = hash_bytes(kRootBlockHash, std::as_bytes(std::span(shape)));
  return hash_bytes(h, std::as_bytes(std::span(mode.data(), mode.size())));
}

TierStorage::TierStorage(int64_t host_slots, const BlockFileGeometry& geometry,
                         std::string disk_dir, int64_t host_snapshots)
    : geometry_(geometry),
      disk_dir_(std::move(disk_dir)),
      // Never read before a save wrote it; a pattern, so a missing copy cannot pass for
      // the zeros of a fresh buffer.
      host_(size_t(host_slots * geometry.block_bytes), uint8_t{0x5a}),
      host_snapshots_(size_t(host_snapshots * geometry.snapshot_bytes), uint8_t{0x5a}) {
  if (!disk_dir_.empty()) ensure_disk_dir(disk_dir_);
}

void ensure_disk_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  const bool ok = !ec && fs::is_directory(dir, ec);
  TROUPE_CHECK(ok, "kv-disk-dir ", dir, ": cannot create the directory (",
               ec ? ec.message() : "not a directory", ")");
}

std::span<uint8_t> TierStorage::host_slot(int32_t slot) {
  const size_t bytes = size_t(geometry_.block_bytes);
  TROUPE_CHECK(slot >= 0 && (size_t(slot) + 1) * bytes <= host_.size(), "host tier slot ", slot,
               " out of range");
  return {host_.data() + size_t(slot) * bytes, bytes};
}

std::span<uint8_t> TierStorage::host_snapshot(int32_t slot) {
  const size_t bytes = size_t(geometry_.snapshot_bytes);
  TROUPE_CHECK(slot >= 0 && bytes > 0 && (size_t(slot) + 1) * bytes <= host_snapshots_.size(),
               "host tier snapshot slot ", slot, " out of range");
  return {host_snapshots_.data() + size_t(slot) * bytes, bytes};
}

void TierStorage::apply(std::span<const TierOp> ops, PagedKvStorage& primary) {
  for (const TierOp& op : ops) {
    switch (op.kind) {
      case TierOpKind::SaveToHost: {
        if (op.block >= 0) {
          const auto src = primary.block_data(op.block);
          std::copy(src.begin(), src.end(), host_slot(op.host_slot).begin());
        }
        if (op.snapshot_slot >= 0)
          primary.save_snapshot(op.snapshot_slot, host_snapshot(op.host_snapshot));
        break;
      }
      case TierOpKind::SpillToDisk: write_file(op, host_slot(op.host_slot), {}); break;
      case TierOpKind::WriteToDisk: {
        std::vector<uint8_t> snapshot;
        if (op.snapshot_slot >= 0) {
          snapshot.resize(size_t(geometry_.snapshot_bytes));
          primary.save_snapshot(op.snapshot_slot, snapshot);
        }
        write_file(op, primary.block_data(op.block), snapshot);
        break;
      }
      case TierOpKind::DropFromDisk: {
        std::error_code ec;
        fs::remove(block_file_path(disk_dir_, op.hash), ec);
        if (ec) spdlog::warn("kv disk tier: cannot delete {}: {}", block_file_path(disk_dir_, op.hash), ec.message());
        break;
      }
      case TierOpKind::LoadFromHost: {
        const auto src = host_slot(op.host_slot);
        std::copy(src.begin(), src.end(), primary.block_data(op.block).begin());
        break;
      }
      case TierOpKind::LoadFromDisk: {
        const auto dst = primary.block_data(op.block);
        TROUPE_CHECK(op.payload.size() == dst.size(), "disk tier load of ", op.payload.size(),
                     " bytes into a block of ", dst.size());
        std::copy(op.payload.begin(), op.payload.end(), dst.begin());
        break;
      }
      case TierOpKind::LoadSnapshot:
        primary.load_snapshot(op.ring_slot, op.host_snapshot >= 0
                                                ? std::span<const uint8_t>(host_snapshot(op.host_snapshot))
                                                : std::span<const uint8_t>(op.payload));
        break;
    }
  }
}

void TierStorage::write_file(const TierOp& op, std::span<const uint8_t> payload,
                             std::span<const uint8_t> snapshot) {
  TROUPE_CHECK(!disk_dir_.empty(), "a disk tier op without a disk dir");
  if (op.host_snapshot >= 0) snapshot = host_snapshot(op.host_snapshot);
  const std::vector<std::byte> file =
      encode_block_file(geometry_, {op.hash, op.parent_hash, op.tokens, !snapshot.empty()},
                        std::as_bytes(payload), std::as_bytes(snapshot));
  // Written aside and renamed: a crash mid-write leaves a stray .tmp, never a short .kvb.
  const std::string path = block_file_path(disk_dir_, op.hash), tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(file.data()), std::streamsize(file.size()));
    if (!out) {
      spdlog::warn("kv disk tier: cannot write {} (the block is not kept on disk)", tmp);
      return;
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) spdlog::warn("kv disk tier: cannot rename {}: {}", tmp, ec.message());
}

namespace {

// The whole file, or false when it cannot be read or is not one of g's two file sizes.
bool read_all(const std::string& path, const BlockFileGeometry& g, std::vector<std::byte>& out) {
  std::error_code ec;
  const auto n = fs::file_size(path, ec);
  if (ec || (n != uint64_t(g.file_bytes()) && (g.snapshot_bytes == 0 || n != uint64_t(g.file_bytes(true)))))
    return false;
  out.resize(size_t(n));
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(out.data()), std::streamsize(n));
  return bool(in);
}

}  // namespace

bool read_block_file(const std::string& dir, const BlockFileGeometry& g, uint64_t hash,
                     uint64_t parent_hash, std::span<const int32_t> tokens,
                     std::vector<uint8_t>& payload, std::vector<uint8_t>& snapshot) {
  const std::string path = block_file_path(dir, hash);
  std::vector<std::byte> file;
  std::string why;
  std::optional<BlockFileHeader> h;
  payload.resize(size_t(g.block_bytes));
  std::vector<std::byte> snap;
  if (!read_all(path, g, file)) {
    why = "missing, unreadable or truncated";
  } else if (h = parse_block_file(file, g, &why, std::as_writable_bytes(std::span(payload)), &snap);
             h && (h->hash != hash || h->parent_hash != parent_hash ||
                   !std::equal(tokens.begin(), tokens.end(), h->tokens.begin(), h->tokens.end()))) {
    why = "holds another block than the prefix cache expects";
    h.reset();
  }
  if (h) {
    const auto* b = reinterpret_cast<const uint8_t*>(snap.data());
    snapshot.assign(b, b + snap.size());
    return true;
  }
  snapshot.clear();
  spdlog::warn("kv disk tier: ignoring {} (recomputing the block): {}", path, why);
  payload.clear();
  return false;
}

std::vector<BlockFileHeader> TierStorage::scan_disk() const {
  std::vector<std::pair<fs::file_time_type, BlockFileHeader>> found;
  if (disk_dir_.empty()) return {};
  std::error_code ec;
  std::vector<std::byte> file;
  for (fs::directory_iterator it(disk_dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() != ".kvb") continue;
    std::string why;
    std::optional<BlockFileHeader> h;
    if (!read_all(p.string(), geometry_, file)) {
      why = "unreadable, truncated or of another size";
    } else if (h = parse_block_file(file, geometry_, &why); h && p.filename() != block_file_name(h->hash)) {
      why = "its name is not its block's hash";
      h.reset();
    }
    if (!h) {
      spdlog::warn("kv disk tier: ignoring {}: {}", p.string(), why);
      continue;
    }
    std::error_code tec;
    found.emplace_back(fs::last_write_time(p, tec), std::move(*h));
  }
  if (ec) spdlog::warn("kv disk tier: cannot list {}: {}", disk_dir_, ec.message());
  std::stable_sort(found.begin(), found.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<BlockFileHeader> out;
  for (auto& [t, h] : found) out.push_back(std::move(h));
  return out;
}

std::string block_file_path(const std::string& dir, uint64_t hash) {
  return (fs::path(dir) / block_file_name(hash)).string();
}

}  // namespace troupe::runtime
