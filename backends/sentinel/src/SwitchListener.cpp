#include "SwitchListener.h"

#include <algorithm>
#include <utility>

#include "dlock/detail/Log.h"

namespace dlock::detail {
namespace {

using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kChannel = "+switch-master";
constexpr milliseconds kPoll{100};  // how often the thread looks at the stop flag
constexpr milliseconds kFirstRetry{100};
constexpr milliseconds kMaxRetry{2000};

}  // namespace

SwitchListener::SwitchListener(Subscriber::Target sentinels, PoolOptions backoff, OnSwitch onSwitch)
    : backoff_(backoff), onSwitch_(std::move(onSwitch)), subscriber_(std::move(sentinels), backoff) {}

SwitchListener::~SwitchListener() { stop(); }

void SwitchListener::stop() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
  }
  stop_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SwitchListener::start() {
  std::lock_guard<std::mutex> guard(mutex_);
  if (started_ || stopping_) return;
  started_ = true;
  thread_ = std::thread([this] { run(); });
}

bool SwitchListener::pause(milliseconds duration) {
  std::unique_lock<std::mutex> guard(mutex_);
  return !stop_.wait_for(guard, duration, [this] { return stopping_; });
}

void SwitchListener::run() {
  std::unique_ptr<IReleaseWatch> watch;
  unsigned subscribeFailures = 0;
  bool pending = false;  // the master may have moved and was not found yet
  milliseconds retry = kFirstRetry;
  Steady::time_point retryAt;
  while (true) {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      if (stopping_) return;
    }
    if (!watch) {
      try {
        watch = subscriber_.watch(kChannel);
      } catch (const std::exception& error) {
        ++subscribeFailures;
        logger()->debug("dlock: subscribing to {} on the sentinels failed: {}", kChannel, error.what());
        const milliseconds doubled(backoff_.reconnectBackoff.count() << std::min(subscribeFailures, 16U));
        if (!pause(std::min(backoff_.maxReconnectBackoff, doubled))) return;
        continue;
      }
      subscribeFailures = 0;
      pending = true;  // a switch before the subscription was confirmed would go unseen
      retryAt = Steady::now();
    }
    if (pending && Steady::now() >= retryAt) {
      if (onSwitch_()) {
        pending = false;
        retry = kFirstRetry;
      } else {
        retryAt = Steady::now() + retry;
        retry = std::min(retry * 2, kMaxRetry);
      }
    }
    milliseconds wait = kPoll;
    if (pending) {
      wait = std::clamp(std::chrono::duration_cast<milliseconds>(retryAt - Steady::now()), milliseconds(1), kPoll);
    }
    // A message, or a lost subscription connection (which may have hidden one).
    if (watch->waitForRelease(wait)) {
      pending = true;
      retryAt = Steady::now();
    }
  }
}

}  // namespace dlock::detail
