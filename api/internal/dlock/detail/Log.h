// SPDX-License-Identifier: Apache-2.0
// Log.h — the `dlock` spdlog logger, shared by core and the backends, and safe across fork().
// Build-only: installed headers never include spdlog.
//
//   logger()->warn("dlock: lost {}", key);       as spdlog's logger: debug, info, warn, should_log
//
// The application may register its own logger named "dlock" before dlock first logs, or change
// this one's sinks and level at any time; dlock looks the logger up once and keeps it.
//
// fork(): a child is made with only the forking thread, and a mutex another thread held at that
// moment stays locked in the child for ever. dlock asks spdlog's registry once, in a way no fork
// can split (lookUpLogger), and every message dlock writes holds a process-wide gate shared while
// it is inside the sinks (their mutexes); a pthread_atfork prepare handler, registered at load,
// takes the gate exclusively, so no dlock thread is inside a sink when the child is made. The
// message's arguments are evaluated before the gate is taken, so a log call never waits on the
// gate while holding a lock of its own. (Another part of the application logging to the same
// sinks is outside this.)
// Thread safety: thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <utility>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "dlock/detail/ForkGate.h"

namespace dlock::detail {

inline constexpr const char* kLoggerName = "dlock";

inline std::atomic<bool> loggerWanted{false};  // a Log was made: a part of dlock that logs exists
inline spdlog::logger& dlockLogger();

// The gate every dlock message holds shared while in the sinks; fork() holds it exclusively,
// after looking the logger up (see lookUpLogger).
struct LogGate {
  static void beforeFork() {
    if (loggerWanted.load(std::memory_order_acquire)) (void)dlockLogger();
  }
};
using LogForkGate = ForkGate<LogGate>;

// The gate and its handlers exist before any thread of the application could fork: a child must
// not find the gate's own one-time initialisation half done by a parent thread (MadeAtLoad).
inline const bool logForkGateMadeAtLoad = (LogForkGate::instance(), true);

// The `dlock` logger: the application's if it registered one, else a stderr logger at `warn`.
// Looked up once, inside the gate: a fork waits for a lookup in progress and none starts while
// a fork is made, so a child never finds loggerLookupMutex, the registry's mutex or the registry
// half written by a lookup of dlock's. Once a Log exists, the forking thread looks it up before
// the fork (prepare), so a child does not ask spdlog's registry, whose mutex another thread of
// the application may hold at the fork. (Looking it up at load instead would miss a
// logger the application registers in main(); a process without any Log never looks it up.)
inline std::atomic<spdlog::logger*> lookedUpLogger{nullptr};
inline std::mutex loggerLookupMutex;  // taken inside the gate only
// Never destroyed: dlock may log from threads still running while statics are destroyed.
inline std::shared_ptr<spdlog::logger>* keptLogger = nullptr;  // guarded by loggerLookupMutex

inline spdlog::logger& lookUpLogger() {
  const LogForkGate::Shared gate;
  const std::lock_guard<std::mutex> lookup(loggerLookupMutex);
  if (spdlog::logger* known = lookedUpLogger.load(std::memory_order_acquire)) return *known;
  std::shared_ptr<spdlog::logger> found = spdlog::get(kLoggerName);
  if (!found) {
    try {
      found = spdlog::stderr_color_mt(kLoggerName);
      found->set_level(spdlog::level::warn);
    } catch (const spdlog::spdlog_ex&) {
      found = spdlog::get(kLoggerName);  // the application registered it meanwhile
    }
  }
  keptLogger = new std::shared_ptr<spdlog::logger>(std::move(found));
  lookedUpLogger.store(keptLogger->get(), std::memory_order_release);
  return **keptLogger;
}

inline spdlog::logger& dlockLogger() {
  spdlog::logger* known = lookedUpLogger.load(std::memory_order_acquire);
  return known != nullptr ? *known : lookUpLogger();
}

// What logger() returns: spdlog's calls, each through the fork gate.
class Log {
 public:
  Log() noexcept {
    if (!loggerWanted.load(std::memory_order_relaxed)) loggerWanted.store(true, std::memory_order_release);
  }
  template <typename... Args>
  void debug(spdlog::format_string_t<Args...> format, Args&&... args) const {
    write(spdlog::level::debug, format, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void info(spdlog::format_string_t<Args...> format, Args&&... args) const {
    write(spdlog::level::info, format, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void warn(spdlog::format_string_t<Args...> format, Args&&... args) const {
    write(spdlog::level::warn, format, std::forward<Args>(args)...);
  }
  [[nodiscard]] bool should_log(spdlog::level::level_enum level) const {  // NOLINT(readability-identifier-naming)
    return dlockLogger().should_log(level);
  }
  const Log* operator->() const noexcept { return this; }

 private:
  template <typename... Args>
  void write(spdlog::level::level_enum level, spdlog::format_string_t<Args...> format, Args&&... args) const {
    spdlog::logger& logger = dlockLogger();
    if (!logger.should_log(level)) return;
    const LogForkGate::Shared gate;
    logger.log(level, format, std::forward<Args>(args)...);
  }
};

// The `dlock` logger, to be used as `logger()->warn(...)`.
inline Log logger() { return Log(); }

}  // namespace dlock::detail
