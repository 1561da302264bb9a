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
// moment stays locked in the child for ever. dlock never asks spdlog's registry (its mutex) after
// the first lookup, and every message dlock writes holds a process-wide gate shared while it is
// inside the sinks (their mutexes); a pthread_atfork prepare handler takes the gate exclusively,
// so no dlock thread is inside a sink when the child is made. The message's arguments are
// evaluated before the gate is taken, so a log call never waits on the gate while holding a lock
// of its own. (Another part of the application logging to the same sinks is outside this.)
// Thread safety: thread-safe.
#pragma once

#include <pthread.h>

#include <memory>
#include <utility>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace dlock::detail {

inline constexpr const char* kLoggerName = "dlock";

// The `dlock` logger: the application's if it registered one, else a stderr logger at `warn`.
inline const std::shared_ptr<spdlog::logger>& dlockLogger() {
  static const std::shared_ptr<spdlog::logger> logger = [] {
    if (auto existing = spdlog::get(kLoggerName)) return existing;
    try {
      auto created = spdlog::stderr_color_mt(kLoggerName);
      created->set_level(spdlog::level::warn);
      return created;
    } catch (const spdlog::spdlog_ex&) {
      return spdlog::get(kLoggerName);  // another thread registered it first
    }
  }();
  return logger;
}

// The gate every dlock message holds shared while in the sinks; fork() holds it exclusively.
// Writer-preferring, so a stream of messages cannot hold a fork off for ever.
class LogForkGate {
 public:
  static LogForkGate& instance() {
    static LogForkGate gate;
    return gate;
  }
  LogForkGate(const LogForkGate&) = delete;
  LogForkGate& operator=(const LogForkGate&) = delete;

  class Shared {
   public:
    Shared() { (void)::pthread_rwlock_rdlock(&instance().lock_); }
    ~Shared() { (void)::pthread_rwlock_unlock(&instance().lock_); }
    Shared(const Shared&) = delete;
    Shared& operator=(const Shared&) = delete;
  };

 private:
  LogForkGate() {
    initialize();
    // Prepare runs in the forking thread; the parent releases what it took. The child makes the
    // gate anew instead: an unlock there would hand the gate to the parent's waiting threads,
    // which the child does not have, and leave it closed to its own.
    (void)::pthread_atfork(
        [] {
          (void)dlockLogger();  // made before the fork, never by a child while another thread made it
          (void)::pthread_rwlock_wrlock(&instance().lock_);
        },
        [] { (void)::pthread_rwlock_unlock(&instance().lock_); }, [] { instance().initialize(); });
  }
  void initialize() {
    pthread_rwlockattr_t attributes;
    (void)::pthread_rwlockattr_init(&attributes);
    (void)::pthread_rwlockattr_setkind_np(&attributes, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    (void)::pthread_rwlock_init(&lock_, &attributes);
    (void)::pthread_rwlockattr_destroy(&attributes);
  }
  ~LogForkGate() = default;  // never destroyed while messages are written: the lock stays valid

  pthread_rwlock_t lock_;
};

// What logger() returns: spdlog's calls, each through the fork gate.
class Log {
 public:
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
    return dlockLogger()->should_log(level);
  }
  const Log* operator->() const noexcept { return this; }

 private:
  template <typename... Args>
  void write(spdlog::level::level_enum level, spdlog::format_string_t<Args...> format, Args&&... args) const {
    const std::shared_ptr<spdlog::logger>& logger = dlockLogger();
    if (!logger->should_log(level)) return;
    const LogForkGate::Shared gate;
    logger->log(level, format, std::forward<Args>(args)...);
  }
};

// The `dlock` logger, to be used as `logger()->warn(...)`.
inline Log logger() {
  (void)LogForkGate::instance();  // its fork handlers, from the first use on
  return Log();
}

}  // namespace dlock::detail
