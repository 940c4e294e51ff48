// A weight file's bytes copied into this process's anonymous memory on 2 MiB pages.
//
// Decode streams every weight it uses once per token. Mapped from a file, those bytes sit
// on 4 KiB page-cache pages, and the TLB walks cost a decode ~25% on a q8_0 GGUF
// (docs/peer-bench.md) and v41-small's routed experts ~1.5x (docs/forward-bench.md); the
// kernel gives no huge pages to an ext4 file's mapping. So both loaders (model/gguf.cpp,
// model/safetensors.cpp) read the file into anonymous memory with MADV_HUGEPAGE (advice
// only: without transparent huge pages it is plain memory), read-only once filled.
#pragma once

#include <cstddef>
#include <string>

namespace troupe::model {

// Copies the `file_size` bytes of the open file `fd` into a fresh anonymous read-only
// mapping of `mapped` bytes (file_size rounded up to 2 MiB; munmap(addr, mapped) frees it).
// Returns nullptr where the kernel gives no such mapping (the caller maps the file
// instead); throws troupe::Error naming `path` where the file cannot be read whole.
void* copy_file_to_huge_pages(int fd, size_t file_size, size_t& mapped, const std::string& path);

}  // namespace troupe::model
