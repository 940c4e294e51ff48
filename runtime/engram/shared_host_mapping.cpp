#include "runtime/engram/shared_host_mapping.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "kernels/check.h"

namespace troupe::runtime {
namespace {

constexpr size_t kHugePage = size_t(2) << 20;
// linux/memfd.h's MFD_HUGE_2MB (21 << MFD_HUGE_SHIFT); glibc's sys/mman.h lacks it.
constexpr unsigned kMfdHuge2Mb = 21u << 26;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// A memfd of `bytes` mapped shared, or nullptr (errno set) when the kernel refuses.
std::byte* map_memfd(const std::string& name, unsigned flags, size_t bytes, int& fd) {
  fd = static_cast<int>(::memfd_create(name.c_str(), MFD_CLOEXEC | flags));
  if (fd < 0) return nullptr;
  void* p = MAP_FAILED;
  if (::ftruncate(fd, static_cast<off_t>(bytes)) == 0)
    p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    ::close(fd);
    fd = -1;
    errno = err;
    return nullptr;
  }
  return static_cast<std::byte*>(p);
}

}  // namespace

SharedHostMapping SharedHostMapping::create(size_t bytes, const std::string& name, bool try_huge) {
  TROUPE_CHECK(bytes > 0, "shared host mapping '", name, "': 0 bytes");
  SharedHostMapping m;
  const size_t base = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  // hugetlb reserves its pages at mmap time: a system without free huge pages refuses
  // here (ENOMEM), never later with a SIGBUS on first touch.
  if (try_huge) {
    const size_t size = round_up(bytes, kHugePage);
    if (std::byte* p = map_memfd(name, MFD_HUGETLB | kMfdHuge2Mb, size, m.fd_)) {
      m.data_ = p, m.size_ = size, m.page_ = kHugePage;
      m.kind_ = "2 MiB huge pages (hugetlb)";
      return m;
    }
  }
  const size_t size = round_up(bytes, base);
  const std::string pages = std::to_string(base >> 10) + " KiB pages";
  if (std::byte* p = map_memfd(name, 0, size, m.fd_)) {
    m.data_ = p, m.size_ = size, m.page_ = base;
    const bool thp = try_huge && ::madvise(p, size, MADV_HUGEPAGE) == 0;
    m.kind_ = pages + (thp ? ", transparent huge pages asked for" : "") +
              (try_huge ? " (no hugetlb pages granted: vm.nr_hugepages)" : "");
    return m;
  }
  const int err = errno;
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  TROUPE_CHECK(p != MAP_FAILED, "shared host mapping '", name, "': cannot map ", bytes,
               " bytes: ", std::strerror(errno));
  m.data_ = static_cast<std::byte*>(p), m.size_ = size, m.page_ = base;
  m.kind_ = pages + ", private to this process (memfd_create: " + std::strerror(err) + ")";
  return m;
}

SharedHostMapping::SharedHostMapping(SharedHostMapping&& o) noexcept { *this = std::move(o); }

SharedHostMapping& SharedHostMapping::operator=(SharedHostMapping&& o) noexcept {
  if (this != &o) {
    release();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    page_ = std::exchange(o.page_, 0);
    fd_ = std::exchange(o.fd_, -1);
    kind_ = std::move(o.kind_);
  }
  return *this;
}

SharedHostMapping::~SharedHostMapping() { release(); }

void SharedHostMapping::release() {
  if (data_) ::munmap(data_, size_);
  if (fd_ >= 0) ::close(fd_);
  data_ = nullptr;
  size_ = 0;
  fd_ = -1;
}

}  // namespace troupe::runtime
