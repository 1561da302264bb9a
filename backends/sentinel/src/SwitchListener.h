// SwitchListener.h — tells the operator when the master may have moved: a subscription to
// `+switch-master` on the sentinels (a detail::Subscriber whose target is the next sentinel in
// turn, so a dead sentinel is left for the next one) and a thread that calls `onSwitch` after
// each message, after each (re)subscription (a switch may have gone unseen meanwhile), and again
// with back-off (100 ms doubling to 2 s) while `onSwitch` reports failure.
// Every message counts, whichever master it names: finding the master again is cheap.
// Owner: one SentinelOperator. Thread safety: thread-safe. Destruction stops and joins the
// thread, which takes up to the sentinel connect + command timeouts when a subscription attempt
// is under way.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "Subscriber.h"

namespace dlock::detail {

class SwitchListener {
 public:
  // Finds the master again; true when it did (false: call again later). Must not throw.
  using OnSwitch = std::function<bool()>;

  SwitchListener(Subscriber::Target sentinels, PoolOptions backoff, OnSwitch onSwitch);
  SwitchListener(const SwitchListener&) = delete;
  SwitchListener& operator=(const SwitchListener&) = delete;
  ~SwitchListener();

  // Starts listening; later calls, and calls after stop(), do nothing.
  void start();
  // Stops listening and joins the thread; later calls do nothing.
  void stop();

 private:
  void run();
  // Sleeps up to `duration`; false when stopping.
  bool pause(std::chrono::milliseconds duration);

  const PoolOptions backoff_;
  const OnSwitch onSwitch_;
  Subscriber subscriber_;

  std::mutex mutex_;
  std::condition_variable stop_;
  bool started_ = false;   // guarded by mutex_
  bool stopping_ = false;  // guarded by mutex_
  std::thread thread_;
};

}  // namespace dlock::detail
