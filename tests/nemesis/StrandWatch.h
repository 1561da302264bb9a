// SPDX-License-Identifier: Apache-2.0
// StrandWatch.h — the semaphore's queue as the server holds it, sampled during a run (single
// server): every few ms it inspects each key and records, in the nemesis's history, a head
// waiter whose permits fit (op `stranded`, key, value = the waiter's token, time = the inspect's
// send, message = its reply's time). A release, leave or reclaim admits every head waiter that
// fits in the same script, so on the library a fitting head is seen only where a hold or place
// ended without its release and no call has reclaimed it yet (check 10, SharedChecks.h).
// Owner: the runner. Thread safety: its own thread; the writer is thread-safe.
#pragma once

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "History.h"

namespace dlock::nemesis {

class StrandWatch {
 public:
  // `uri`: a link to the server that no fault touches.
  StrandWatch(std::string uri, std::vector<std::string> keys, HistoryWriter& log);
  StrandWatch(const StrandWatch&) = delete;
  StrandWatch& operator=(const StrandWatch&) = delete;
  ~StrandWatch();

 private:
  void run();

  std::string uri_;
  std::vector<std::string> keys_;
  HistoryWriter& log_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace dlock::nemesis
