// Host memory every process of a node can map (a memfd: another process maps the same
// pages through /proc/<pid>/fd/<fd> or an fd passed to it), on 2 MiB huge pages when the
// system grants them (hugetlb: vm.nr_hugepages), else on normal pages with transparent
// huge pages asked for (madvise). Falls back to private anonymous memory where memfd is
// missing. Linux only; move-only; unmapped and closed on destruction.
#pragma once

#include <cstddef>
#include <string>

namespace troupe::runtime {

class SharedHostMapping {
 public:
  // bytes > 0; name labels the memfd (/proc/<pid>/fd). try_huge false: normal pages only.
  // Throws troupe::Error when no memory at all can be mapped.
  static SharedHostMapping create(size_t bytes, const std::string& name, bool try_huge = true);

  SharedHostMapping() = default;  // empty: maps nothing

  SharedHostMapping(SharedHostMapping&& o) noexcept;
  SharedHostMapping& operator=(SharedHostMapping&& o) noexcept;
  SharedHostMapping(const SharedHostMapping&) = delete;
  SharedHostMapping& operator=(const SharedHostMapping&) = delete;
  ~SharedHostMapping();

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }        // mapped bytes (rounded up to page_size)
  size_t page_size() const { return page_; }   // 2 MiB (hugetlb) or the base page size
  int fd() const { return fd_; }               // -1: private anonymous memory
  // For logs: "2 MiB huge pages (hugetlb)", "4 KiB pages, transparent huge pages asked
  // for (no hugetlb pages granted)", ...
  const std::string& describe() const { return kind_; }

 private:
  void release();
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  size_t page_ = 0;
  int fd_ = -1;
  std::string kind_;
};

}  // namespace troupe::runtime
