// safetensors reader (mmap) and writer. Layout: u64 little-endian header length n,
// n bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": ...},
// then the data section; offsets are relative to the data section.
//
//   [ n (8 bytes) ][ header JSON (n bytes) ][ data section ..................... ]
//                                           ^ begin                    ^ end
//
// Every header field is checked before a pointer into the mapping is formed, so a
// truncated or corrupted file is a troupe::Error, never an out-of-bounds read.
#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "kernels/check.h"
#include "model/file_copy.h"

namespace troupe::model {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // real headers are a few MB at most
constexpr int64_t kMaxElements = int64_t(1) << 48;  // no real tensor is larger

struct DTypeName {
  DType dtype;
  const char* name;
  int64_t size;
};
constexpr std::array<DTypeName, 9> kDTypes{{{DType::F32, "F32", 4},
                                            {DType::BF16, "BF16", 2},
                                            {DType::F16, "F16", 2},
                                            {DType::F8_E4M3, "F8_E4M3", 1},
                                            {DType::F8_E8M0, "F8_E8M0", 1},
                                            {DType::I8, "I8", 1},
                                            {DType::U8, "U8", 1},
                                            {DType::I32, "I32", 4},
                                            {DType::I64, "I64", 8}}};

const DTypeName* find_dtype(const std::string& name) {
  for (const auto& d : kDTypes)
    if (name == d.name) return &d;
  return nullptr;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  return os.str() + ']';
}

std::string dtypes_str(const std::vector<DType>& dtypes) {
  std::string s;
  for (size_t i = 0; i < dtypes.size(); ++i)
    s += (i ? " or " : "") + std::string(to_string(dtypes[i]));
  return s;
}

// A JSON integer >= 0 (safetensors writes shapes and offsets as plain integers).
int64_t nonneg_int(const json& v, const std::string& what) {
  if (v.is_number_unsigned() && v.get<uint64_t>() <= uint64_t(INT64_MAX)) return v.get<int64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return v.get<int64_t>();
  TROUPE_FAIL(what << " must be a non-negative integer, got " << v.dump());
}

// Bytes the kernel reports available (MemAvailable), 0 where it cannot be read.
uint64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib << 10;
  return 0;
}

// How a checkpoint's files come into memory. A decode step reads every weight it uses:
// a page touched for the first time mid-decode costs a fault there (the experts a prompt
// did not pick), and a 4 KiB page of a file mapping costs TLB walks on every read
// (model/file_copy.h). So a checkpoint that fits in half the available memory is read
// whole at load onto 2 MiB pages, as the GGUF loader does (all its files together: a
// per-file test would pass every shard of a checkpoint larger than memory, since
// MemAvailable counts the page cache the reads fill); a larger one is mapped lazily
// rather than crowd out the rest (docs/forward-bench.md measures both).
// TROUPE_MMAP_POPULATE=0 maps every checkpoint lazily.
enum class Load { kCopy, kLazyMap };

Load load_mode(uintmax_t bytes) {
  if (const char* env = std::getenv("TROUPE_MMAP_POPULATE"); env && std::strcmp(env, "0") == 0)
    return Load::kLazyMap;
  return bytes <= available_memory_bytes() / 2 ? Load::kCopy : Load::kLazyMap;
}

}  // namespace

const char* to_string(DType d) {
  for (const auto& e : kDTypes)
    if (e.dtype == d) return e.name;
  return "?";
}

int64_t dtype_size(DType d) {
  for (const auto& e : kDTypes)
    if (e.dtype == d) return e.size;
  return 0;
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// One read-only mapping of a .safetensors file and the tensors its header lists.
class SafetensorsFile {
 public:
  SafetensorsFile(const std::string& path, Load load) : path_(path) {
    map_file(load);
    try {
      parse_header();
    } catch (...) {  // no destructor runs for a constructor that throws: free the bytes here
      unmap();
      throw;
    }
  }
  ~SafetensorsFile() { unmap(); }
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }

 private:
  void unmap() {
    if (base_ && base_ != MAP_FAILED) munmap(base_, mapped_);
    base_ = nullptr;
  }

  void map_file(Load load) {
    const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) TROUPE_FAIL(path_ << ": cannot open: " << std::strerror(errno));
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      TROUPE_FAIL(path_ << ": not a regular file");
    }
    size_ = size_t(st.st_size);
    if (size_ < 8) {
      ::close(fd);
      TROUPE_FAIL(path_ << ": " << size_ << " bytes is too short for a safetensors file");
    }
    if (load == Load::kCopy) {
      try {
        base_ = copy_file_to_huge_pages(fd, size_, mapped_, path_);
      } catch (...) {
        ::close(fd);
        throw;
      }
      if (base_) {
        ::close(fd);
        return;
      }
    }
    // Lazy, or no anonymous memory for the copy: populated then, as the copy would be.
    mapped_ = size_;
    base_ = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | (load == Load::kCopy ? MAP_POPULATE : 0), fd, 0);
    ::close(fd);
    if (base_ == MAP_FAILED) TROUPE_FAIL(path_ << ": mmap failed: " << std::strerror(errno));
  }

  void parse_header() {
    const auto* bytes = static_cast<const uint8_t*>(base_);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];  // little-endian on any host
    if (n > size_ - 8 || n > kMaxHeaderBytes)
      TROUPE_FAIL(path_ << ": header length " << n << " does not fit the file (" << size_
                        << " bytes) or exceeds 100 MB");
    const char* text = reinterpret_cast<const char*>(bytes + 8);
    json header;
    bool duplicate = false;
    std::set<std::string> keys;
    // nlohmann keeps the last of two equal keys silently; a duplicated tensor name is an error.
    auto on_event = [&](int depth, json::parse_event_t ev, json& parsed) {
      if (depth == 1 && ev == json::parse_event_t::key &&
          !keys.insert(parsed.get<std::string>()).second)
        duplicate = true;
      return true;
    };
    try {
      header = json::parse(text, text + n, on_event);
    } catch (const json::exception& e) {
      TROUPE_FAIL(path_ << ": header is not valid JSON (" << e.what() << ")");
    }
    if (duplicate) TROUPE_FAIL(path_ << ": header lists a tensor name twice");
    if (!header.is_object()) TROUPE_FAIL(path_ << ": header is not a JSON object");
    data_ = bytes + 8 + n;
    data_size_ = int64_t(size_ - 8 - n);
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") continue;
      try {
        tensors_.push_back(parse_entry(name, entry));
      } catch (const Error& e) {
        TROUPE_FAIL(path_ << ": tensor '" << name << "': " << e.what());
      }
    }
    check_no_overlap();
  }

  TensorInfo parse_entry(const std::string& name, const json& e) const {
    if (!e.is_object()) TROUPE_FAIL("entry is not an object");
    const auto dt = e.find("dtype"), sh = e.find("shape"), off = e.find("data_offsets");
    if (dt == e.end() || !dt->is_string()) TROUPE_FAIL("missing or non-string 'dtype'");
    const DTypeName* d = find_dtype(dt->get<std::string>());
    if (!d) TROUPE_FAIL("unknown dtype " << dt->dump());
    if (sh == e.end() || !sh->is_array()) TROUPE_FAIL("missing or non-list 'shape'");
    if (off == e.end() || !off->is_array() || off->size() != 2)
      TROUPE_FAIL("'data_offsets' must be a list [begin, end]");
    TensorInfo t;
    t.name = name;
    t.dtype = d->dtype;
    t.file = path_;
    int64_t numel = 1;
    for (const json& v : *sh) {
      t.shape.push_back(nonneg_int(v, "shape entry"));
      if (t.shape.back() != 0 && numel > kMaxElements / t.shape.back())
        TROUPE_FAIL("shape " << sh->dump() << " is too large");
      numel *= t.shape.back();
    }
    const int64_t begin = nonneg_int((*off)[0], "data_offsets begin");
    const int64_t end = nonneg_int((*off)[1], "data_offsets end");
    if (begin > end || end > data_size_)
      TROUPE_FAIL("data_offsets [" << begin << ", " << end << "] lie outside the data section of "
                                   << data_size_ << " bytes");
    t.nbytes = end - begin;
    if (t.nbytes != numel * d->size)
      TROUPE_FAIL("data_offsets span " << t.nbytes << " bytes but " << d->name << ' '
                                       << shape_str(t.shape) << " needs " << numel * d->size);
    t.data = data_ + begin;
    return t;
  }

  void check_no_overlap() const {
    std::vector<const TensorInfo*> by_start;
    for (const auto& t : tensors_)
      if (t.nbytes > 0) by_start.push_back(&t);
    std::sort(by_start.begin(), by_start.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->data < b->data; });
    for (size_t i = 1; i < by_start.size(); ++i)
      if (by_start[i]->data < by_start[i - 1]->data + by_start[i - 1]->nbytes)
        TROUPE_FAIL(path_ << ": tensors '" << by_start[i - 1]->name << "' and '"
                          << by_start[i]->name << "' overlap in the data section");
  }

  std::string path_;
  void* base_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // what munmap frees: size_, or the copy's whole 2 MiB pages
  const uint8_t* data_ = nullptr;
  int64_t data_size_ = 0;
  std::vector<TensorInfo> tensors_;
};

namespace {

// The files model.safetensors.index.json names (weight_map: tensor -> file), if present.
std::optional<std::map<std::string, std::string>> read_index(const fs::path& dir) {
  const fs::path index = dir / "model.safetensors.index.json";
  std::error_code ec;
  if (!fs::exists(index, ec)) return std::nullopt;
  std::ifstream in(index, std::ios::binary);
  std::map<std::string, std::string> weight_map;
  try {
    const json j = json::parse(in);
    const json& m = j.at("weight_map");
    if (!m.is_object()) TROUPE_FAIL(index.string() << ": weight_map is not an object");
    for (const auto& [name, file] : m.items()) weight_map[name] = file.get<std::string>();
  } catch (const json::exception& e) {
    TROUPE_FAIL(index.string() << ": bad index file (" << e.what() << ")");
  }
  return weight_map;
}

std::vector<fs::path> list_safetensors(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".safetensors" && e.is_regular_file(ec)) files.push_back(e.path());
  if (ec) TROUPE_FAIL(dir.string() << ": cannot list the folder: " << ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

Checkpoint Checkpoint::open(const std::string& path) {
  const fs::path p(path);
  std::error_code ec;
  if (!fs::exists(p, ec)) TROUPE_FAIL("checkpoint '" << path << "' does not exist");
  const bool single = fs::is_regular_file(p, ec);  // one .safetensors file is accepted too
  std::optional<std::map<std::string, std::string>> index;
  if (!single) index = read_index(p);
  std::vector<fs::path> files;
  if (single) {
    files = {p};
  } else if (index) {
    std::set<std::string> names;
    for (const auto& [tensor, file] : *index) names.insert(file);
    for (const auto& f : names) files.push_back(p / f);
  } else {
    files = list_safetensors(p);
  }
  if (files.empty()) TROUPE_FAIL("checkpoint '" << path << "' has no *.safetensors file");
  uintmax_t bytes = 0;
  for (const auto& f : files) {  // a file that cannot be sized fails at its open below
    const uintmax_t n = fs::file_size(f, ec);
    if (!ec) bytes += n;
  }
  const Load load = load_mode(bytes);
  Checkpoint ckpt;
  for (const auto& f : files) {
    ckpt.files_.push_back(std::make_unique<SafetensorsFile>(f.string(), load));
    for (const TensorInfo& t : ckpt.files_.back()->tensors()) {
      auto [it, fresh] = ckpt.tensors_.emplace(t.name, t);
      if (!fresh)
        TROUPE_FAIL("tensor '" << t.name << "' is in two files: " << it->second.file << " and "
                               << t.file);
    }
  }
  if (index)
    for (const auto& [tensor, file] : *index) {
      const TensorInfo* t = ckpt.find(tensor);
      if (!t || fs::path(t->file).filename() != fs::path(file).filename())
        TROUPE_FAIL("tensor '" << tensor << "' is not in " << file
                               << " as model.safetensors.index.json says");
    }
  return ckpt;
}

Checkpoint::~Checkpoint() = default;
Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&&) noexcept = default;

bool Checkpoint::has(const std::string& name) const {
  return tensors_.count(name) > 0;
}

const TensorInfo* Checkpoint::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const TensorInfo& Checkpoint::get(const std::string& name, std::initializer_list<DType> dtypes,
                                  const std::vector<int64_t>& shape) const {
  return get(name, std::vector<DType>(dtypes), shape);
}

const TensorInfo& Checkpoint::get(const std::string& name, const std::vector<DType>& dtypes,
                                  const std::vector<int64_t>& shape) const {
  const TensorInfo* t = find(name);
  if (!t)
    TROUPE_FAIL("tensor '" << name << "' is missing from the checkpoint (expected "
                           << dtypes_str(dtypes) << ' ' << shape_str(shape) << ')');
  if (std::find(dtypes.begin(), dtypes.end(), t->dtype) == dtypes.end() || t->shape != shape)
    TROUPE_FAIL("tensor '" << name << "': expected " << dtypes_str(dtypes) << ' '
                           << shape_str(shape) << ", found " << to_string(t->dtype) << ' '
                           << shape_str(t->shape) << " in " << t->file);
  if (t->released)
    TROUPE_FAIL("tensor '" << name << "': its bytes were given back after load (the int8 "
                              "experts keep only their row groups, model/row_groups_copy.h)");
  return *t;
}

bool Checkpoint::release(const void* data, int64_t nbytes) {
  if (by_data_.empty())
    for (auto& [name, t] : tensors_) by_data_.emplace(t.data, &t);
  const auto it = by_data_.find(static_cast<const uint8_t*>(data));
  if (it == by_data_.end() || it->second->nbytes != nbytes || nbytes <= 0) return false;
  TensorInfo& t = *it->second;
  // Whole pages only: a page shared with a neighbouring tensor stays.
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(t.data) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(t.data) + uintptr_t(t.nbytes)) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
  t.released = true;
  return true;
}

void SafetensorsWriter::add(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            std::vector<uint8_t> bytes) {
  TensorInfo probe;
  probe.shape = shape;
  TROUPE_CHECK(name != "__metadata__" && !name.empty(), "bad tensor name '", name, "'");
  TROUPE_CHECK(int64_t(bytes.size()) == probe.numel() * dtype_size(dtype), "tensor '", name,
               "': ", bytes.size(), " bytes for ", to_string(dtype), ' ', shape_str(shape));
  for (const auto& e : entries_) TROUPE_CHECK(e.name != name, "tensor '", name, "' added twice");
  entries_.push_back({name, dtype, std::move(shape), std::move(bytes)});
}

void SafetensorsWriter::write(const std::string& path) const {
  json header = json::object();  // std::map underneath: keys come out sorted
  int64_t offset = 0;
  for (const auto& e : entries_) {
    const int64_t end = offset + int64_t(e.bytes.size());
    header[e.name] = {
        {"dtype", to_string(e.dtype)}, {"shape", e.shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // pad so the data section starts 8-aligned
  std::array<char, 8> len{};
  for (int i = 0; i < 8; ++i) len[i] = char((uint64_t(text.size()) >> (8 * i)) & 0xff);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) TROUPE_FAIL(path << ": cannot open for writing");
  out.write(len.data(), len.size());
  out.write(text.data(), std::streamsize(text.size()));
  for (const auto& e : entries_)
    out.write(reinterpret_cast<const char*>(e.bytes.data()), std::streamsize(e.bytes.size()));
  out.close();
  if (!out) TROUPE_FAIL(path << ": write failed");
}

}  // namespace troupe::model
