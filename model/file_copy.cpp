#include "model/file_copy.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kernels/check.h"

namespace troupe::model {

void* copy_file_to_huge_pages(int fd, size_t file_size, size_t& mapped, const std::string& path) {
  constexpr size_t kHuge = size_t{2} << 20;
  mapped = (file_size + kHuge - 1) / kHuge * kHuge;
  void* addr = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (addr == MAP_FAILED) return nullptr;
  ::madvise(addr, mapped, MADV_HUGEPAGE);
  for (size_t done = 0; done < file_size;) {
    const ssize_t r = ::pread(fd, static_cast<char*>(addr) + done, file_size - done, off_t(done));
    if (r <= 0) {
      const int err = errno;
      ::munmap(addr, mapped);
      TROUPE_FAIL("cannot read '" << path << "': " << (r == 0 ? "file shrank" : std::strerror(err)));
    }
    done += static_cast<size_t>(r);
  }
  ::mprotect(addr, mapped, PROT_READ);
  return addr;
}

}  // namespace troupe::model
