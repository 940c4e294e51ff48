// The GGUF reader (layout in gguf.h). The parser walks a cursor over the bytes; every read
// first checks that the bytes are there, and every count is bounded by the bytes left
// (each element takes at least its minimum encoded size) before a container is sized.
#include "model/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "kernels/check.h"
#include "model/file_copy.h"

namespace troupe::model {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint32_t kMaxDims = 4;         // ggml's GGML_MAX_DIMS
constexpr uint64_t kMaxStringBytes = 1ull << 30;
constexpr uint64_t kMaxAlignment = 1ull << 20;
constexpr int64_t kMaxElements = int64_t(1) << 48;  // no real tensor is larger

// The smallest encoding of one value of a type (an empty string, an empty array).
uint64_t min_value_bytes(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::BOOL: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: case GgufType::STRING: return 8;
    case GgufType::ARRAY: return 12;
  }
  return 1;
}

bool is_known_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::F64); }

}  // namespace

const char* to_string(GgufType t) {
  static const char* const kNames[] = {"u8",  "i8",     "u16",   "i16", "u32", "i32", "f32",
                                       "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<uint32_t>(t);
  return i < std::size(kNames) ? kNames[i] : "unknown";
}

size_t GgufArray::size() const {
  return std::max({ints.size(), floats.size(), strings.size()});
}

int64_t GgufTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

struct GgufFile::Mapping {
  void* addr = nullptr;
  size_t size = 0;
  bool anonymous = false;  // copy_file_to_huge_pages' copy, which this process may rewrite
  bool writable = false;   // inside edit_in_place
  std::vector<bool> rewritten;  // per tensor (tensors_' order)
  ~Mapping() {
    if (addr && size) ::munmap(addr, size);
  }
};

// Inside the parser: throws naming the source and the cursor's byte offset.
#define GGUF_FAIL(...)             \
  do {                             \
    std::ostringstream fail_os_;   \
    fail_os_ << __VA_ARGS__;       \
    fail_at(pos_, fail_os_.str()); \
  } while (0)

// Reads one file's header into a GgufFile; errors name the source and the byte offset.
class GgufParser {
 public:
  GgufParser(std::span<const uint8_t> bytes, GgufFile& out) : b_(bytes), f_(out) {}

  void run() {
    if (b_.size() < 4 || u32() != kMagic)
      GGUF_FAIL("not a GGUF file (the first 4 bytes are not \"GGUF\")");
    f_.version_ = u32();
    if (f_.version_ != 2 && f_.version_ != 3)
      GGUF_FAIL("GGUF version " << f_.version_ << " is not supported (troupe reads versions 2 and 3)");
    const uint64_t n_tensors = u64();
    const uint64_t n_kv = u64();
    // A key-value pair takes at least 8 (key) + 4 (type) + 1 bytes, a tensor record
    // 8 + 4 + 4 + 8; counts beyond what the bytes could hold are lies.
    bound_count(n_kv, 13, "metadata_kv_count");
    bound_count(n_tensors, 24, "tensor_count");
    for (uint64_t i = 0; i < n_kv; ++i) read_kv();
    read_alignment();
    f_.tensors_.reserve(n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) read_tensor_info();
    place_tensors();
  }

 private:
  template <class... A>
  [[noreturn]] void fail_at(size_t at, const A&... a) const {
    std::ostringstream os;
    (os << ... << a);
    TROUPE_FAIL(f_.source_ << ": " << os.str() << " (at byte " << at << " of " << b_.size()
                           << ")");
  }

  void need(uint64_t n, const char* what) const {
    if (n > b_.size() - pos_)
      GGUF_FAIL("truncated: " << what << " needs " << n << " bytes, " << (b_.size() - pos_)
                         << " are left");
  }
  template <class T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  uint32_t u32(const char* what = "a u32") { return read<uint32_t>(what); }
  uint64_t u64(const char* what = "a u64") { return read<uint64_t>(what); }

  void bound_count(uint64_t n, uint64_t min_bytes, const char* what) const {
    if (n > (b_.size() - pos_) / min_bytes)
      GGUF_FAIL(what << " " << n << " cannot fit the " << (b_.size() - pos_) << " bytes left");
  }

  std::string string(const char* what) {
    const uint64_t n = u64(what);
    if (n > kMaxStringBytes) GGUF_FAIL(what << " of " << n << " bytes is longer than 1 GiB");
    need(n, what);
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return s;
  }

  GgufType value_type(const std::string& key) {
    const uint32_t t = u32("a value type");
    if (!is_known_type(t)) GGUF_FAIL("key '" << key << "' has unknown value type " << t);
    return static_cast<GgufType>(t);
  }

  // A scalar of type t into the variant (u64 / int64 / double / bool / string).
  GgufValue::Variant_ scalar(GgufType t, const std::string& key);

  GgufArray array(const std::string& key) {
    GgufArray a;
    a.elem = value_type(key);
    if (a.elem == GgufType::ARRAY) GGUF_FAIL("key '" << key << "' is an array of arrays");
    const uint64_t n = u64("an array length");
    bound_count(n, min_value_bytes(a.elem), "array length");
    if (a.elem == GgufType::STRING) {
      a.strings.reserve(n);
      for (uint64_t i = 0; i < n; ++i) a.strings.push_back(string("an array string"));
    } else if (a.elem == GgufType::F32 || a.elem == GgufType::F64) {
      a.floats.reserve(n);
      for (uint64_t i = 0; i < n; ++i) a.floats.push_back(std::get<double>(scalar(a.elem, key)));
    } else {
      a.ints.reserve(n);
      for (uint64_t i = 0; i < n; ++i) {
        const auto v = scalar(a.elem, key);
        if (const auto* u = std::get_if<uint64_t>(&v)) {
          if (*u > uint64_t(INT64_MAX)) GGUF_FAIL("key '" << key << "': u64 element above 2^63-1");
          a.ints.push_back(static_cast<int64_t>(*u));
        } else if (const auto* b = std::get_if<bool>(&v)) {
          a.ints.push_back(*b);
        } else {
          a.ints.push_back(std::get<int64_t>(v));
        }
      }
    }
    return a;
  }

  void read_kv() {
    std::string key = string("a metadata key");
    GgufValue v;
    v.type = value_type(key);
    if (v.type == GgufType::ARRAY) {
      v.value = array(key);
    } else {
      std::visit([&](auto&& x) { v.value = x; }, scalar(v.type, key));
    }
    if (!f_.kv_.emplace(key, std::move(v)).second) GGUF_FAIL("metadata key '" << key << "' repeats");
  }

  void read_alignment() {
    const auto it = f_.kv_.find("general.alignment");
    if (it == f_.kv_.end()) return;
    const auto* a = std::get_if<uint64_t>(&it->second.value);
    if (it->second.type != GgufType::U32 || !a)
      GGUF_FAIL("general.alignment must be a u32, it is a " << to_string(it->second.type));
    if (*a == 0 || (*a & (*a - 1)) != 0 || *a > kMaxAlignment)
      GGUF_FAIL("general.alignment " << *a << " is not a power of two up to 2^20");
    f_.alignment_ = *a;
  }

  void read_tensor_info() {
    GgufTensor t;
    t.name = string("a tensor name");
    const uint32_t n_dims = u32("n_dims");
    if (n_dims == 0 || n_dims > kMaxDims)
      GGUF_FAIL("tensor '" << t.name << "' has " << n_dims << " dimensions (1 to 4 allowed)");
    int64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t n = u64("a dimension");
      if (n > uint64_t(kMaxElements) || (n && numel > kMaxElements / int64_t(n)))
        GGUF_FAIL("tensor '" << t.name << "' has more than 2^48 elements");
      numel *= static_cast<int64_t>(n);
      t.ne.push_back(static_cast<int64_t>(n));
    }
    const uint32_t type = u32("a tensor type");
    const GgmlTypeInfo* info = supported_ggml_type(type);
    if (!info)
      GGUF_FAIL("tensor '" << t.name << "' has type " << ggml_type_name(type)
                      << ", which troupe does not read (it reads " << supported_ggml_type_names()
                      << ")");
    t.type = info->type;
    if (t.ne[0] % info->block_elems != 0)
      GGUF_FAIL("tensor '" << t.name << "': row length " << t.ne[0] << " is not a multiple of "
                      << info->name << "'s block of " << info->block_elems);
    t.nbytes = numel / info->block_elems * info->block_bytes;
    t.offset = u64("a tensor offset");
    if (t.offset % f_.alignment_ != 0)
      GGUF_FAIL("tensor '" << t.name << "' offset " << t.offset << " is not a multiple of the alignment "
                      << f_.alignment_);
    if (!f_.tensor_index_.emplace(t.name, f_.tensors_.size()).second)
      GGUF_FAIL("tensor '" << t.name << "' appears twice");
    f_.tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment; every tensor must lie
  // inside the file and no two may overlap.
  void place_tensors() {
    const uint64_t a = f_.alignment_;
    const uint64_t start = (pos_ + a - 1) / a * a;
    if (f_.tensors_.empty()) return;
    if (start > b_.size()) GGUF_FAIL("truncated: the data section would start at byte " << start);
    const uint64_t data_bytes = b_.size() - start;
    std::vector<const GgufTensor*> by_offset;
    for (GgufTensor& t : f_.tensors_) {
      if (t.offset > data_bytes || uint64_t(t.nbytes) > data_bytes - t.offset)
        fail_at(start, "truncated: tensor '", t.name, "' needs bytes [", t.offset, ", ",
                t.offset + uint64_t(t.nbytes), ") of a data section of ", data_bytes);
      t.data = b_.data() + start + t.offset;
      by_offset.push_back(&t);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](const GgufTensor* x, const GgufTensor* y) { return x->offset < y->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
      const GgufTensor& p = *by_offset[i - 1];
      if (p.offset + uint64_t(p.nbytes) > by_offset[i]->offset)
        fail_at(start, "tensors '", p.name, "' and '", by_offset[i]->name, "' overlap");
    }
  }

  std::span<const uint8_t> b_;
  GgufFile& f_;
  size_t pos_ = 0;
};

GgufValue::Variant_ GgufParser::scalar(GgufType t, const std::string& key) {
  switch (t) {
    case GgufType::U8: return uint64_t{read<uint8_t>("a u8")};
    case GgufType::I8: return int64_t{read<int8_t>("an i8")};
    case GgufType::U16: return uint64_t{read<uint16_t>("a u16")};
    case GgufType::I16: return int64_t{read<int16_t>("an i16")};
    case GgufType::U32: return uint64_t{read<uint32_t>("a u32")};
    case GgufType::I32: return int64_t{read<int32_t>("an i32")};
    case GgufType::U64: return read<uint64_t>("a u64");
    case GgufType::I64: return read<int64_t>("an i64");
    case GgufType::F32: return double{read<float>("an f32")};
    case GgufType::F64: return read<double>("an f64");
    case GgufType::BOOL: {
      const uint8_t b = read<uint8_t>("a bool");
      if (b > 1) fail_at(pos_ - 1, "key '", key, "': bool byte ", int(b), " is neither 0 nor 1");
      return b == 1;
    }
    case GgufType::STRING: return string("a string value");
    case GgufType::ARRAY: break;
  }
  fail_at(pos_, "key '", key, "': unexpected value type");
}

#undef GGUF_FAIL

GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

GgufFile GgufFile::parse(std::span<const uint8_t> bytes, const std::string& source) {
  GgufFile f;
  f.source_ = source;
  GgufParser(bytes, f).run();
  return f;
}

GgufFile GgufFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) TROUPE_FAIL("cannot open '" << path << "': " << std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    TROUPE_FAIL("'" << path << "' is not a regular file");
  }
  auto m = std::make_unique<Mapping>();
  const size_t file_size = static_cast<size_t>(st.st_size);
  // The file's bytes on 2 MiB pages (model/file_copy.h); TROUPE_GGUF_MMAP=1 maps it instead.
  const char* plain = std::getenv("TROUPE_GGUF_MMAP");
  if (file_size > 0 && !(plain && std::strcmp(plain, "1") == 0)) {
    try {
      m->addr = copy_file_to_huge_pages(fd, file_size, m->size, path);
      m->anonymous = m->addr != nullptr;
    } catch (...) {
      ::close(fd);
      throw;
    }
  }
  if (file_size > 0 && m->addr == nullptr) {  // TROUPE_GGUF_MMAP=1, or no anonymous memory
    m->size = file_size;
    m->addr = ::mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m->addr == MAP_FAILED) {
      m->addr = nullptr;
      ::close(fd);
      TROUPE_FAIL("cannot mmap '" << path << "': " << std::strerror(errno));
    }
  }
  ::close(fd);
  const std::span<const uint8_t> bytes(static_cast<const uint8_t*>(m->addr), file_size);
  GgufFile f = parse(bytes, path);
  m->rewritten.assign(f.tensors_.size(), false);
  f.mapping_ = std::move(m);
  return f;
}

bool GgufFile::rewritable() const { return mapping_ && mapping_->anonymous; }

void GgufFile::edit_in_place(const std::function<void()>& edit) const {
  TROUPE_CHECK(rewritable(), source_, ": the tensors' bytes are not this process's own copy");
  Mapping& m = *mapping_;
  if (::mprotect(m.addr, m.size, PROT_READ | PROT_WRITE) != 0)
    TROUPE_FAIL(source_ << ": cannot make the tensors writable: " << std::strerror(errno));
  m.writable = true;
  struct Seal {  // read-only again, also when edit throws
    Mapping& m;
    ~Seal() {
      ::mprotect(m.addr, m.size, PROT_READ);
      m.writable = false;
    }
  } seal{m};
  edit();
}

uint8_t* GgufFile::writable_data(const GgufTensor& t) const {
  TROUPE_CHECK(mapping_ && mapping_->writable, source_, ": '", t.name, "' is writable only inside edit_in_place");
  return const_cast<uint8_t*>(t.data);
}

void GgufFile::mark_rewritten(const GgufTensor& t) const {
  TROUPE_CHECK(rewritable(), source_, ": '", t.name, "' cannot have been rewritten");
  mapping_->rewritten[size_t(&t - tensors_.data())] = true;
}

bool GgufFile::rewritten(const GgufTensor& t) const {
  return mapping_ && !mapping_->rewritten.empty() && mapping_->rewritten[size_t(&t - tensors_.data())];
}

const GgufValue* GgufFile::find(const std::string& key) const {
  const auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

const GgufTensor* GgufFile::find_tensor(const std::string& name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {
const GgufValue& must_find(const GgufFile& f, const std::string& key) {
  const GgufValue* v = f.find(key);
  if (!v) TROUPE_FAIL(f.source() << ": metadata key '" << key << "' is missing");
  return *v;
}
}  // namespace

std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue& v = must_find(*this, key);
  if (const auto* s = std::get_if<std::string>(&v.value)) return *s;
  TROUPE_FAIL(source_ << ": metadata key '" << key << "' is a " << to_string(v.type)
                      << ", not a string");
}

uint64_t GgufFile::get_uint(const std::string& key) const {
  const GgufValue& v = must_find(*this, key);
  if (const auto* u = std::get_if<uint64_t>(&v.value)) return *u;
  if (const auto* i = std::get_if<int64_t>(&v.value); i && *i >= 0) return uint64_t(*i);
  TROUPE_FAIL(source_ << ": metadata key '" << key << "' must be a non-negative integer, it is a "
                      << to_string(v.type));
}

uint64_t GgufFile::get_uint_or(const std::string& key, uint64_t fallback) const {
  return find(key) ? get_uint(key) : fallback;
}

double GgufFile::get_float(const std::string& key) const {
  const GgufValue& v = must_find(*this, key);
  if (const auto* d = std::get_if<double>(&v.value)) return *d;
  TROUPE_FAIL(source_ << ": metadata key '" << key << "' is a " << to_string(v.type)
                      << ", not a float");
}

double GgufFile::get_float_or(const std::string& key, double fallback) const {
  return find(key) ? get_float(key) : fallback;
}

const GgufArray& GgufFile::get_array(const std::string& key) const {
  const GgufValue& v = must_find(*this, key);
  if (const auto* a = std::get_if<GgufArray>(&v.value)) return *a;
  TROUPE_FAIL(source_ << ": metadata key '" << key << "' is a " << to_string(v.type)
                      << ", not an array");
}

}  // namespace troupe::model
