// SPDX-License-Identifier: Apache-2.0
// LogCapture.h — records what the `dlock` logger prints while in scope, for tests that check
// warnings (and that no password is ever logged).
#pragma once

#include <memory>
#include <mutex>
#include <sstream>
#include <string>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace dlock::test {

class LogCapture {
 public:
  explicit LogCapture(spdlog::level::level_enum level = spdlog::level::debug) {
    logger_ = spdlog::get("dlock");
    if (!logger_) {
      logger_ = spdlog::stderr_color_mt("dlock");
      logger_->set_level(spdlog::level::warn);
    }
    previousLevel_ = logger_->level();
    sink_ = std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_);
    logger_->sinks().push_back(sink_);
    logger_->set_level(level);
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  ~LogCapture() {
    auto& sinks = logger_->sinks();
    for (auto it = sinks.begin(); it != sinks.end(); ++it) {
      if (*it == sink_) {
        sinks.erase(it);
        break;
      }
    }
    logger_->set_level(previousLevel_);
  }

  std::string text() {
    logger_->flush();
    return stream_.str();
  }

 private:
  std::ostringstream stream_;
  std::shared_ptr<spdlog::logger> logger_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
  spdlog::level::level_enum previousLevel_ = spdlog::level::warn;
};

}  // namespace dlock::test
