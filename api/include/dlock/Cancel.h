// SPDX-License-Identifier: Apache-2.0
// Cancel.h — cancelling a wait from another thread, in the shape of std::stop_source/stop_token
// (C++20) for C++17 callers (CancelSource, CancelToken, CancelCallback).
//
//   CancelSource stop;              owns the request; copies share it
//   stop.token()                    what a wait takes: lock->lock("job", stop.token())
//   stop.requestCancel()            every wait given the token throws InterruptedError
//   CancelCallback cb(token, f)     runs f once on the cancel (at once, on this thread, when the
//                                   token is cancelled already); its destructor waits for a running f
//
// A default CancelToken is never cancelled. C++20 builds also take a std::stop_token where a
// CancelToken is expected. Fork: a forked child's cancel runs only callbacks registered in the
// child (a parent's waits are not there), and never waits for a callback a parent thread ran.
// Owner: shared (copies share one state). Thread safety: thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#if __cplusplus >= 202002L
#include <version>
#endif
#if defined(__cpp_lib_jthread)
#include <stop_token>
#endif

namespace dlock {
namespace detail {
class CancelState;  // core/src/Cancel.cpp
}

class CancelToken {
 public:
  CancelToken() noexcept = default;  // never cancelled
#if defined(__cpp_lib_jthread)
  // Follows `stop`: cancelled once stop.request_stop() was called.
  CancelToken(std::stop_token stop);  // NOLINT(google-explicit-constructor): taken where a token is
#endif

  [[nodiscard]] bool cancelRequested() const noexcept;
  // False for a token no cancel can reach (the default one).
  [[nodiscard]] bool cancellable() const noexcept { return state_ != nullptr; }

 private:
  friend class CancelSource;
  friend class CancelCallback;
  explicit CancelToken(std::shared_ptr<detail::CancelState> state) noexcept : state_(std::move(state)) {}

  std::shared_ptr<detail::CancelState> state_;
  std::shared_ptr<const void> keepAlive_;  // a std::stop_callback feeding state_
};

class CancelSource {
 public:
  CancelSource();

  [[nodiscard]] CancelToken token() const noexcept { return CancelToken(state_); }
  // Cancels every wait given a token of this source, running the callbacks on this thread. True
  // when this call made the request (false: made already).
  bool requestCancel() noexcept;
  [[nodiscard]] bool cancelRequested() const noexcept;

 private:
  std::shared_ptr<detail::CancelState> state_;
};

class CancelCallback {
 public:
  // Runs `callback` when `token` is cancelled: at once, on this thread, if it is already. The
  // callback must not throw.
  CancelCallback(const CancelToken& token, std::function<void()> callback);
  CancelCallback(const CancelCallback&) = delete;
  CancelCallback& operator=(const CancelCallback&) = delete;
  // After it returns the callback neither runs nor is running (unless it is running this
  // destructor itself), as std::stop_callback's.
  ~CancelCallback();

 private:
  std::shared_ptr<detail::CancelState> state_;
  std::uint64_t id_ = 0;  // 0: not registered (ran at once, or the token cannot be cancelled)
};

#if defined(__cpp_lib_jthread)
inline CancelToken::CancelToken(std::stop_token stop) {
  CancelSource source;
  *this = source.token();
  keepAlive_ = std::make_shared<std::stop_callback<std::function<void()>>>(
      std::move(stop), std::function<void()>([source]() mutable { source.requestCancel(); }));
}
#endif

}  // namespace dlock
