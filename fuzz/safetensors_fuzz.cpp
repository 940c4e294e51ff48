// safetensors headers (model/safetensors): the bytes are a whole .safetensors file. The
// reader only opens files (it mmaps them), so the bytes go to a memfd opened by its
// /proc/self/fd path. Every tensor of a file that loads is read end to end: the header
// checks promise that each lies inside the mapping.
// Contract: a bad file is a troupe::Error; any other exception is a finding.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "fuzz/targets.h"
#include "kernels/check.h"
#include "model/safetensors.h"

namespace troupe::fuzz {
namespace {

// One memfd, rewritten for every input (creating one per input would be slower).
int input_fd() {
  static const int fd = memfd_create("safetensors_fuzz", MFD_CLOEXEC);
  if (fd < 0) throw std::runtime_error(std::string("memfd_create: ") + std::strerror(errno));
  return fd;
}

void write_input(int fd, const uint8_t* data, size_t size) {
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != ssize_t(size))
    throw std::runtime_error(std::string("writing the memfd: ") + std::strerror(errno));
}

uint8_t read_all(const model::Checkpoint& ckpt) {
  uint8_t sum = 0;
  for (const auto& [name, t] : ckpt.tensors())
    for (int64_t i = 0; i < t.nbytes; ++i) sum ^= t.data[i];
  return sum;
}

}  // namespace

void safetensors(const uint8_t* data, size_t size) {
  const int fd = input_fd();
  write_input(fd, data, size);
  try {
    const auto ckpt = model::Checkpoint::open("/proc/self/fd/" + std::to_string(fd));
    volatile uint8_t sink = read_all(ckpt);
    (void)sink;
  } catch (const Error&) {
  }
}

}  // namespace troupe::fuzz

TROUPE_FUZZ_MAIN(troupe::fuzz::safetensors)
