#include "net/metrics/registry.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <sstream>

#include "kernels/check.h"

namespace troupe::net::metrics {

namespace {

enum Type { kCounter, kGauge, kHistogram };
const char* const kTypeNames[] = {"counter", "gauge", "histogram"};

bool valid_name(const std::string& s, bool allow_colon) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || (allow_colon && c == ':');
  });
}

void check_labels(const Labels& labels, int type) {
  for (const auto& [name, value] : labels) {
    TROUPE_CHECK(valid_name(name, false) && !name.starts_with("__"), "invalid label name '", name,
                 "'");
    TROUPE_CHECK(!(type == kHistogram && name == "le"), "'le' is reserved in histograms");
  }
}

std::string label_text(const Labels& labels, const std::string& extra = {}) {
  if (labels.empty() && extra.empty()) return {};
  std::string out = "{";
  for (const auto& [name, value] : labels) {
    if (out.size() > 1) out += ',';
    out += name + "=\"" + escape_label_value(value) + '"';
  }
  if (!extra.empty()) out += (out.size() > 1 ? "," : "") + extra;
  return out + "}";
}

std::string escape_help(const std::string& help) {
  std::string out;
  for (char c : help) out += c == '\\' ? "\\\\" : c == '\n' ? "\\n" : std::string(1, c);
  return out;
}

// Python's repr(float): fixed notation for exponents in [-4, 16), else d.ddde±XX.
std::string python_repr(double v) {
  char buf[64];
  const auto end = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific).ptr;
  const std::string sci(buf, end);  // shortest round trip, e.g. "-1.25e-05"
  const size_t e = sci.find('e');
  const int exp = std::stoi(sci.substr(e + 1));
  std::string mant = sci.substr(0, e);
  const bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits = mant.substr(0, 1) + (mant.size() > 2 ? mant.substr(2) : "");
  std::string out;
  if (exp < -4 || exp >= 16) {
    const std::string exp_digits = std::to_string(std::abs(exp));
    out = mant + (exp < 0 ? "e-" : "e+") + (exp_digits.size() < 2 ? "0" : "") + exp_digits;
  } else if (exp < 0) {
    out = "0." + std::string(size_t(-exp - 1), '0') + digits;
  } else {
    if (digits.size() < size_t(exp) + 1) digits.resize(size_t(exp) + 1, '0');
    const std::string frac = digits.substr(size_t(exp) + 1);
    out = digits.substr(0, size_t(exp) + 1) + "." + (frac.empty() ? "0" : frac);
  }
  return (neg ? "-" : "") + out;
}

}  // namespace

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  std::string s = python_repr(v);
  // prometheus_client's floatToGoString: Go switches to exponents sooner than Python.
  const size_t dot = s.find('.');
  if (v > 0 && dot != std::string::npos && dot > 6) {
    std::string mantissa = s.substr(0, 1) + "." + s.substr(1, dot - 1) + s.substr(dot + 1);
    while (!mantissa.empty() && (mantissa.back() == '0' || mantissa.back() == '.'))
      mantissa.pop_back();
    return mantissa + "e+0" + std::to_string(dot - 1);
  }
  return s;
}

std::string escape_label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

void Counter::inc(double v) {
  TROUPE_CHECK(v >= 0.0, "a counter only goes up, got inc(", v, ")");
  value_.fetch_add(v);
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {
  for (size_t i = 1; i < bounds_.size(); ++i)
    TROUPE_CHECK(bounds_[i - 1] < bounds_[i], "histogram bounds must increase");
}

void Histogram::observe(double v) {
  // le semantics: v falls in the first bucket whose bound is >= v.
  const size_t i = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  std::lock_guard lock(mutex_);
  ++counts_[i];
  sum_ += v;
}

void Histogram::add(std::span<const int64_t> per_bucket, double sum) {
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < per_bucket.size() && i < counts_.size(); ++i)
    counts_[i] += uint64_t(std::max<int64_t>(0, per_bucket[i]));
  sum_ += sum;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.bounds = bounds_;
  std::lock_guard lock(mutex_);
  uint64_t running = 0;
  for (uint64_t c : counts_) s.cumulative.push_back(running += c);
  s.sum = sum_;
  s.count = running;
  return s;
}

struct Registry::Family {
  std::string name;  // as exposed (counters end in _total)
  std::string help;
  int type = kCounter;
  std::vector<double> bounds;
  std::map<Labels, std::unique_ptr<Counter>> counters;
  std::map<Labels, std::unique_ptr<Gauge>> gauges;
  std::map<Labels, std::unique_ptr<Histogram>> histograms;

  void render(std::ostream& os) const;
};

void Registry::Family::render(std::ostream& os) const {
  os << "# HELP " << name << ' ' << escape_help(help) << '\n';
  os << "# TYPE " << name << ' ' << kTypeNames[type] << '\n';
  for (const auto& [labels, c] : counters)
    os << name << label_text(labels) << ' ' << format_value(c->value()) << '\n';
  for (const auto& [labels, g] : gauges)
    os << name << label_text(labels) << ' ' << format_value(g->value()) << '\n';
  for (const auto& [labels, h] : histograms) {
    const Histogram::Snapshot s = h->snapshot();
    for (size_t i = 0; i <= s.bounds.size(); ++i) {
      const double le = i < s.bounds.size() ? s.bounds[i] : INFINITY;
      os << name << "_bucket" << label_text(labels, "le=\"" + format_value(le) + '"') << ' '
         << format_value(double(s.cumulative[i])) << '\n';
    }
    os << name << "_sum" << label_text(labels) << ' ' << format_value(s.sum) << '\n';
    os << name << "_count" << label_text(labels) << ' ' << format_value(double(s.count)) << '\n';
  }
}

Registry::Registry() = default;
Registry::~Registry() = default;

Registry::Family& Registry::family(const std::string& name, const std::string& help, int type,
                                   const std::vector<double>& bounds) {
  TROUPE_CHECK(valid_name(name, true), "invalid metric name '", name, "'");
  std::string exposed = name;
  if (type == kCounter) {
    if (exposed.ends_with("_total")) exposed.resize(exposed.size() - 6);
    exposed += "_total";
  }
  for (const auto& f : families_) {
    if (f->name != exposed) continue;
    TROUPE_CHECK(f->type == type && f->bounds == bounds, "metric '", exposed,
                 "' is already registered with another type or buckets");
    return *f;
  }
  families_.push_back(std::make_unique<Family>(Family{exposed, help, type, bounds, {}, {}, {}}));
  return *families_.back();
}

Counter& Registry::counter(const std::string& name, const std::string& help, const Labels& labels) {
  check_labels(labels, kCounter);
  std::lock_guard lock(mutex_);
  auto& child = family(name, help, kCounter, {}).counters[labels];
  if (!child) child = std::make_unique<Counter>();
  return *child;
}

Gauge& Registry::gauge(const std::string& name, const std::string& help, const Labels& labels) {
  check_labels(labels, kGauge);
  std::lock_guard lock(mutex_);
  auto& child = family(name, help, kGauge, {}).gauges[labels];
  if (!child) child = std::make_unique<Gauge>();
  return *child;
}

Histogram& Registry::histogram(const std::string& name, const std::string& help,
                               const std::vector<double>& bounds, const Labels& labels) {
  check_labels(labels, kHistogram);
  std::lock_guard lock(mutex_);
  auto& child = family(name, help, kHistogram, bounds).histograms[labels];
  if (!child) child = std::make_unique<Histogram>(bounds);
  return *child;
}

std::string Registry::render() const {
  std::ostringstream os;
  std::lock_guard lock(mutex_);
  for (const auto& f : families_) f->render(os);
  return os.str();
}

}  // namespace troupe::net::metrics
