#include "runtime/eplb/expert_loads_json.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "kernels/check.h"

namespace troupe::runtime::eplb {
namespace {

using nlohmann::json;

// SAX events of the text: depth 1 is the list of layers, depth 2 a layer's counts. Any
// other shape stops the parse with `error` set.
class LoadsReader : public nlohmann::json_sax<json> {
 public:
  ExpertLoads loads;
  std::string error;

  bool null() override { return reject("null"); }
  bool boolean(bool) override { return reject("a boolean"); }
  bool number_integer(number_integer_t v) override {
    return count(static_cast<double>(v), v < 0, std::to_string(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    return count(static_cast<double>(v), false, std::to_string(v));
  }
  bool number_float(number_float_t v, const string_t& text) override {
    return count(v, v < 0, text);
  }
  bool string(string_t&) override { return reject("a string"); }
  bool binary(binary_t&) override { return reject("binary data"); }
  bool start_object(std::size_t) override { return reject("an object"); }
  bool key(string_t&) override { return reject("an object"); }
  bool end_object() override { return reject("an object"); }

  bool start_array(std::size_t) override {
    if (depth_ == 2) return reject("a nested array");
    if (++depth_ == 2) row_ = 0;
    return true;
  }
  bool end_array() override {
    if (depth_-- == 1) {
      if (loads.num_layers == 0) return fail("no layers: expected [[tokens per expert] per layer]");
      return true;
    }
    if (row_ == 0) return fail("layer " + std::to_string(loads.num_layers) + " has no experts");
    if (loads.num_layers == 0) {
      loads.num_logical = row_;
    } else if (row_ != loads.num_logical) {
      return fail("layer " + std::to_string(loads.num_layers) + " has " + std::to_string(row_) +
                  " experts, layer 0 has " + std::to_string(loads.num_logical));
    }
    ++loads.num_layers;
    return true;
  }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& e) override {
    std::ostringstream os;
    os << "not valid JSON at byte " << position << ": " << e.what();
    return fail(os.str());
  }

 private:
  std::string where() const {
    return "weight[" + std::to_string(loads.num_layers) + "][" + std::to_string(row_) + "]";
  }
  bool reject(const std::string& what) {
    if (depth_ == 0) return fail("expected [[tokens per expert] per layer], got " + what);
    if (depth_ == 1) return fail("layer " + std::to_string(loads.num_layers) + " is " + what +
                                 ", expected a list of token counts");
    return fail(where() + " is " + what + ", expected a token count");
  }
  // text: the number as written, for the message.
  bool count(double v, bool negative, const std::string& text) {
    if (depth_ != 2) return reject("a number");
    const float f = static_cast<float>(v);  // above FLT_MAX: inf, refused
    if (negative || !std::isfinite(f))
      return fail(where() + " = " + text + " is not a finite count >= 0");
    // A row longer than the first one fails now, before a huge ragged row is stored.
    if (loads.num_layers > 0 && row_ >= loads.num_logical)
      return fail("layer " + std::to_string(loads.num_layers) + " has more than " +
                  std::to_string(loads.num_logical) + " experts, layer 0 has " +
                  std::to_string(loads.num_logical));
    loads.weight.push_back(f);
    ++row_;
    return true;
  }
  bool fail(std::string message) {
    if (error.empty()) error = std::move(message);
    return false;
  }

  int depth_ = 0;
  int64_t row_ = 0;  // counts read so far in the current layer
};

}  // namespace

ExpertLoads parse_expert_loads_json(std::string_view text) {
  LoadsReader reader;
  const bool ok = json::sax_parse(text.begin(), text.end(), &reader);
  if (!ok || !reader.error.empty())
    TROUPE_FAIL("expert loads: " << (reader.error.empty() ? "not valid JSON" : reader.error));
  return std::move(reader.loads);
}

}  // namespace troupe::runtime::eplb
