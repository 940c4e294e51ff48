#include "runtime/dep/all_gather.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "kernels/check.h"

namespace troupe::runtime {
namespace {

namespace fs = std::filesystem;

void write_file(const fs::path& path, const Bytes& bytes) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    TROUPE_CHECK(out.good(), "all-gather: cannot write ", tmp.string());
  }
  fs::rename(tmp, path);  // atomic within a directory: readers see all of it or nothing
}

bool read_file(const fs::path& path, Bytes& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  const std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  out.resize(s.size());
  for (size_t i = 0; i < s.size(); ++i) out[i] = static_cast<std::byte>(s[i]);
  return true;
}

}  // namespace

AllGather directory_all_gather(std::string dir, std::string name, int rank, int size,
                               double timeout_s) {
  TROUPE_CHECK(size >= 1 && rank >= 0 && rank < size, "all-gather: rank ", rank, " of ", size);
  return [dir = std::move(dir), name = std::move(name), rank, size, timeout_s](const Bytes& mine) {
    const fs::path base(dir);
    fs::create_directories(base);
    write_file(base / (name + "." + std::to_string(rank)), mine);
    std::vector<Bytes> all(size);
    std::vector<bool> have(size, false);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::microseconds(static_cast<int64_t>(timeout_s * 1e6));
    for (int got = 0;;) {
      for (int r = 0; r < size; ++r)
        if (!have[r] && read_file(base / (name + "." + std::to_string(r)), all[r])) have[r] = true, ++got;
      if (got == size) return all;
      if (std::chrono::steady_clock::now() > deadline) {
        std::string missing;
        for (int r = 0; r < size; ++r)
          if (!have[r]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        TROUPE_FAIL("all-gather in " << dir << ": no address from rank(s) " << missing << " after "
                                     << timeout_s << " s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };
}

}  // namespace troupe::runtime
