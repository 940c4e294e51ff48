#include "cli/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>

namespace troupe::cli {
namespace {

spdlog::level::level_enum to_spdlog(config::LogLevel l) {
  switch (l) {
    case config::LogLevel::Trace:
      return spdlog::level::trace;
    case config::LogLevel::Debug:
      return spdlog::level::debug;
    case config::LogLevel::Info:
      return spdlog::level::info;
    case config::LogLevel::Warning:
      return spdlog::level::warn;
    case config::LogLevel::Error:
      return spdlog::level::err;
    case config::LogLevel::Critical:
      return spdlog::level::critical;
  }
  return spdlog::level::info;
}

// {"ts":"2026-12-01T15:04:05.123Z","level":"warning","thread":123,"msg":"..."}: the
// message is escaped by nlohmann (bytes that are not UTF-8 become U+FFFD, so a client's
// bad bytes quoted in a message cannot break the line).
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto t = std::chrono::system_clock::to_time_t(msg.time);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(msg.time.time_since_epoch()).count() %
        1000;
    std::tm tm{};
    gmtime_r(&t, &tm);
    char ts[40];
    const size_t n = std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    std::snprintf(ts + n, sizeof ts - n, ".%03dZ", static_cast<int>(ms));
    nlohmann::json j;
    j["ts"] = ts;
    j["level"] = std::string(spdlog::level::to_string_view(msg.level).data(),
                             spdlog::level::to_string_view(msg.level).size());
    j["thread"] = msg.thread_id;
    j["msg"] = std::string(msg.payload.data(), msg.payload.size());
    const std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    dest.append(line.data(), line.data() + line.size());
    dest.push_back('\n');
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

}  // namespace

void setup_logging(config::LogLevel level, config::LogFormat format) {
  auto logger =
      std::make_shared<spdlog::logger>("troupe", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  if (format == config::LogFormat::Json) {
    logger->set_formatter(std::make_unique<JsonFormatter>());
  } else {
    logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
  }
  logger->set_level(to_spdlog(level));
  logger->flush_on(spdlog::level::trace);  // stderr is a pipe under supervisors and tests
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace troupe::cli
