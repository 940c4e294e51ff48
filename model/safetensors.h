// safetensors over mmap: a reader that validates the header JSON (dtypes, shapes,
// offsets inside the file, no overlaps, no duplicates across files) and a writer
// with deterministic output. A Checkpoint is every *.safetensors file of a folder
// (and model.safetensors.index.json when present).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace troupe::model {

enum class DType : uint8_t { F32, BF16, F16, F8_E4M3, F8_E8M0, I8, U8, I32, I64 };
const char* to_string(DType d);
int64_t dtype_size(DType d);

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // into the mmap
  int64_t nbytes = 0;
  std::string file;  // which file holds it
  bool released = false;  // Checkpoint::release gave its bytes back: data must not be read
  int64_t numel() const;
};

class SafetensorsFile;  // one mmapped file

class Checkpoint {
 public:
  // Opens every *.safetensors of dir (or the files model.safetensors.index.json names);
  // a path to one .safetensors file opens just that file.
  static Checkpoint open(const std::string& dir);
  ~Checkpoint();
  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint& operator=(Checkpoint&&) noexcept;

  bool has(const std::string& name) const;
  // The tensor, checked against the expected dtype(s) and shape; the error names the
  // tensor, what was expected and what the file has.
  const TensorInfo& get(const std::string& name, std::initializer_list<DType> dtypes,
                        const std::vector<int64_t>& shape) const;
  const TensorInfo& get(const std::string& name, const std::vector<DType>& dtypes,
                        const std::vector<int64_t>& shape) const;
  const TensorInfo* find(const std::string& name) const;
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }

  // Gives back the memory of the tensor whose bytes are exactly [data, data + nbytes)
  // (the whole pages inside them: madvise DONTNEED on the mapping), once nothing will read
  // them again: get() of it then fails, naming why. False (nothing done) where no tensor
  // has those bytes. Used by model/row_groups_copy.h for the experts whose row groups
  // are all the int8 path reads.
  bool release(const void* data, int64_t nbytes);

 private:
  Checkpoint() = default;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, TensorInfo> tensors_;
  std::map<const uint8_t*, TensorInfo*> by_data_;  // release's index, made on first use
};

// Writer: tensors in the order added; header keys sorted, offsets packed, 8-byte aligned header.
class SafetensorsWriter {
 public:
  void add(const std::string& name, DType dtype, std::vector<int64_t> shape,
           std::vector<uint8_t> bytes);
  void write(const std::string& path) const;  // throws troupe::Error on I/O failure

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::vector<Entry> entries_;
};

}  // namespace troupe::model
