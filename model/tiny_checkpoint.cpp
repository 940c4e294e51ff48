#include "model/tiny_checkpoint.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <unistd.h>

#include "kernels/check.h"
#include "kernels/quant.h"
#include "model/engram_hash.h"
#include "model/safetensors.h"
#include "model/tensor_spec.h"
#include "model/tokenizer_builder.h"

namespace troupe::model {
namespace {

namespace fs = std::filesystem;

uint64_t mix(uint64_t v) {
  uint64_t z = v + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A per-tensor random stream keyed by (seed, tensor name): tensors do not depend on
// the order they are generated in.
class Stream {
 public:
  Stream(uint64_t seed, const std::string& name) : state_(mix(seed)) {
    for (unsigned char ch : name) state_ = mix(state_ ^ ch);
  }
  double uniform() { return ((state_ = mix(state_)) >> 11) * 0x1.0p-53; }
  double normal() {  // Box-Muller
    const double u1 = std::max(uniform(), 1e-300), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }

 private:
  uint64_t state_;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// MODEL.md §10: the initial value rule of each float tensor, by name.
std::vector<float> init_values(const std::string& name, int64_t n, uint64_t seed) {
  std::vector<float> v(n);
  Stream rng(seed, name);
  if (ends_with(name, "norm.weight") || ends_with(name, "q_weight") || ends_with(name, "k_weight") ||
      ends_with(name, "_scale")) {
    std::fill(v.begin(), v.end(), 1.0f);
  } else if (ends_with(name, "_base") || ends_with(name, "attn_sink")) {
    std::fill(v.begin(), v.end(), 0.0f);
  } else if (ends_with(name, "gate.bias")) {
    for (float& x : v) x = static_cast<float>(rng.uniform() * 0.02 - 0.01);
  } else {
    for (float& x : v) x = static_cast<float>(0.02 * rng.normal());
  }
  return v;
}

template <class T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::string scale_name(const std::string& weight_name) {
  return weight_name.substr(0, weight_name.size() - std::string(".weight").size()) + ".scale";
}

// Adds one tensor (and its .scale companion when quantized) to the writer.
void add_tensor(SafetensorsWriter& out, const TensorSpec& spec, const TensorSpec* scale,
                const ModelConfig& cfg, uint64_t seed) {
  const std::string& name = spec.name;
  const DType dtype = spec.dtypes.front();
  if (name == "engram.token_map") {
    std::vector<int32_t> ids(spec.shape[0]);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);  // tiny: identity
    out.add(name, DType::I32, spec.shape, bytes_of(ids));
    return;
  }
  if (name == "engram.multipliers") {
    std::vector<int64_t> m;
    for (size_t i = 0; i < cfg.engram_layer_ids.size(); ++i) {
      const auto row = engram_multipliers(cfg, static_cast<int64_t>(i));
      m.insert(m.end(), row.begin(), row.end());
    }
    out.add(name, DType::I64, spec.shape, bytes_of(m));
    return;
  }
  if (spec.format == TensorFormat::Plain) {
    int64_t n = 1;
    for (int64_t d : spec.shape) n *= d;
    std::vector<float> v = init_values(name, n, seed);
    if (dtype == DType::F32) {
      out.add(name, DType::F32, spec.shape, bytes_of(v));
    } else {
      TROUPE_CHECK(dtype == DType::BF16, "tiny generator: unexpected dtype for ", name);
      std::vector<uint16_t> b(n);
      for (int64_t i = 0; i < n; ++i) b[i] = kernels::bf16_encode(v[i]);
      out.add(name, DType::BF16, spec.shape, bytes_of(b));
    }
    return;
  }
  // Quantized: FP4 data is [r, c/2] bytes; FP8 has 32x32 block scales; ROWFP8 row scales.
  const bool fp4 = spec.format == TensorFormat::Fp4;
  const int64_t rows = spec.shape[0], cols = fp4 ? spec.shape[1] * 2 : spec.shape[1];
  const std::vector<float> w = init_values(name, rows * cols, seed);
  std::vector<uint8_t> q(fp4 ? rows * cols / 2 : rows * cols);
  std::vector<uint8_t> s(scale->numel());
  if (fp4) kernels::quantize_weight_fp4(w.data(), rows, cols, q.data(), s.data());
  else if (spec.format == TensorFormat::RowFp8)
    kernels::quantize_weight_rowfp8(w.data(), rows, cols, q.data(), s.data());
  else kernels::quantize_weight_fp8(w.data(), rows, cols, q.data(), s.data());
  out.add(name, fp4 ? DType::I8 : DType::F8_E4M3, spec.shape, std::move(q));
  out.add(scale->name, DType::F8_E8M0, scale->shape, std::move(s));
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) TROUPE_FAIL("cannot write " << path.string());
}

}  // namespace

void write_checkpoint(const std::string& dir, const ModelConfig& cfg, uint64_t seed) {
  fs::create_directories(dir);
  const std::vector<TensorSpec> specs = checkpoint_tensor_specs(cfg);
  std::map<std::string, const TensorSpec*> by_name;
  for (const TensorSpec& t : specs) by_name[t.name] = &t;
  SafetensorsWriter out;
  for (const TensorSpec& t : specs) {
    if (t.format == TensorFormat::Scale) continue;  // written with its weight
    const TensorSpec* scale = nullptr;
    if (t.format != TensorFormat::Plain) {
      auto it = by_name.find(scale_name(t.name));
      TROUPE_CHECK(it != by_name.end(), "no scale tensor listed for ", t.name);
      scale = it->second;
    }
    add_tensor(out, t, scale, cfg, seed);
  }
  out.write((fs::path(dir) / "model.safetensors").string());
  write_text(fs::path(dir) / "config.json", config_to_json(cfg));
  write_text(fs::path(dir) / "tokenizer.json", build_tiny_tokenizer_json(cfg.vocab_size));
}

void write_tiny_checkpoint(const std::string& dir, uint64_t seed) {
  write_checkpoint(dir, preset_config("v41-tiny"), seed);
}

std::string builtin_tiny_model_dir(uint64_t seed) {
  fs::path base;
  if (const char* t = std::getenv("TROUPE_CACHE")) base = t;
  else if (const char* x = std::getenv("XDG_CACHE_HOME")) base = fs::path(x) / "troupe";
  else if (const char* h = std::getenv("HOME")) base = fs::path(h) / ".cache" / "troupe";
  else base = fs::temp_directory_path() / "troupe-cache";
  const fs::path dir = base / ("v41-tiny-seed" + std::to_string(seed));
  if (fs::exists(dir / "model.safetensors")) return dir.string();
  // Write into a private folder, then rename: a concurrent or interrupted run never
  // leaves a half-written model behind.
  const fs::path tmp = base / (".tmp-" + std::to_string(seed) + "-" + std::to_string(getpid()));
  fs::remove_all(tmp);
  write_tiny_checkpoint(tmp.string(), seed);
  std::error_code ec;
  fs::rename(tmp, dir, ec);
  if (ec) fs::remove_all(tmp);  // someone else finished first
  return dir.string();
}

}  // namespace troupe::model
