// SPDX-License-Identifier: Apache-2.0
#include "HoldRenewal.h"

#include <cstdio>
#include <random>

#include <dlock/LockError.h>

namespace dlock::nemesis {

std::string newOwnerToken() {
  thread_local std::mt19937_64 random(std::random_device{}());
  char text[33];
  std::snprintf(text, sizeof text, "%016llx%016llx", static_cast<unsigned long long>(random()),
                static_cast<unsigned long long>(random()));
  return text;
}

void recordHoldOp(const std::function<void(Op)>& sink, const char* name, const std::string& key, const std::string& owner,
                  std::string value, std::int64_t timeNs, std::uint64_t token) {
  Op op;
  op.kind = Kind::Info;
  op.op = name;
  op.key = key;
  op.message = owner;
  op.value = std::move(value);
  op.timeNs = timeNs;
  op.token = token;
  sink(std::move(op));
}

void HoldRenewal::start(RenewedHold hold) {
  stop();
  hold_ = std::move(hold);
  stop_ = false;
  thread_ = std::thread([this] { loop(); });
}

void HoldRenewal::stop() {
  {
    const std::lock_guard<std::mutex> guard(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void HoldRenewal::loop() {
  std::unique_lock<std::mutex> guard(mutex_);
  while (!stop_) {
    if (wake_.wait_for(guard, hold_.lease / 3, [this] { return stop_; })) break;
    guard.unlock();
    const std::int64_t sent = monotonicNs();
    bool gone = false;
    try {
      const ExtendResult result = hold_.renew();
      if (result.extended) {
        const std::chrono::milliseconds valid = result.validity.count() > 0 ? result.validity : hold_.lease;
        *hold_.deadlineNs = sent + valid.count() * 1'000'000;
        recordHoldOp(hold_.sink, "lease", hold_.key, hold_.owner, std::to_string(valid.count()), sent);
      } else if (!result.unknown) {
        gone = true;
      }
    } catch (const LockError&) {  // unknown: the local deadline decides
    }
    if (gone) {
      *hold_.lost = true;
      recordHoldOp(hold_.sink, "lost", hold_.key, hold_.owner, "", 0, hold_.fence);
    }
    guard.lock();
    if (gone) break;
  }
}

}  // namespace dlock::nemesis
