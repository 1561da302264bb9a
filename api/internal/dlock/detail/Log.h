// Log.h — the `dlock` spdlog logger, shared by core and the backends. Build-only: installed
// headers never include spdlog. The application may register its own logger named "dlock"
// first (spdlog::register_logger) or change this one's sinks and level; we only look it up.
#pragma once

#include <memory>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace dlock::detail {

inline constexpr const char* kLoggerName = "dlock";

// The `dlock` logger: the application's if it registered one, else a stderr logger at `warn`.
inline std::shared_ptr<spdlog::logger> logger() {
  if (auto existing = spdlog::get(kLoggerName)) return existing;
  try {
    auto created = spdlog::stderr_color_mt(kLoggerName);
    created->set_level(spdlog::level::warn);
    return created;
  } catch (const spdlog::spdlog_ex&) {
    // Another thread registered it first.
    return spdlog::get(kLoggerName);
  }
}

}  // namespace dlock::detail
