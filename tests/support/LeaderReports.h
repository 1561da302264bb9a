// SPDX-License-Identifier: Apache-2.0
// LeaderReports.h — what an election observer reported, in order, for tests to wait on.
//   LeaderReports reports; election->observe([&](const LeaderInfo& now) { reports.add(now); });
//   reports.waitUntil(done)   the reports once done(reports) holds (bounded: 30 s of real time)
// Owner: one test. Thread safety: add() from the observer's thread, waitUntil() from the test's.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "dlock/core/Election.h"

namespace dlock::test {

class LeaderReports {
 public:
  void add(const LeaderInfo& info) {
    std::lock_guard<std::mutex> guard(mutex_);
    seen_.push_back(info);
    changed_.notify_all();
  }
  template <class Done>
  std::vector<LeaderInfo> waitUntil(Done done) {
    std::unique_lock<std::mutex> guard(mutex_);
    changed_.wait_for(guard, std::chrono::seconds(30), [&] { return done(seen_); });
    return seen_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<LeaderInfo> seen_;
};

}  // namespace dlock::test
