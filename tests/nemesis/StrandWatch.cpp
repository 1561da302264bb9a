// SPDX-License-Identifier: Apache-2.0
#include "StrandWatch.h"

#include <dlock/ISemaphoreOperator.h>
#include <dlock/dlock.h>

#include <chrono>

namespace dlock::nemesis {

StrandWatch::StrandWatch(std::string uri, std::vector<std::string> keys, HistoryWriter& log)
    : uri_(std::move(uri)), keys_(std::move(keys)), log_(log), thread_([this] { run(); }) {}

StrandWatch::~StrandWatch() {
  stop_ = true;
  thread_.join();
}

void StrandWatch::run() {
  std::shared_ptr<IOperator> backend;
  while (!stop_) {
    try {
      if (!backend) backend = dlock::connect(uri_);
      auto& semaphore = dynamic_cast<ISemaphoreOperator&>(*backend);
      for (const std::string& key : keys_) {
        const std::int64_t sent = monotonicNs();
        const SemaphoreInfo info = semaphore.inspectSemaphore(key);
        if (info.capacity == 0 || info.waiters.empty() || info.inUse + info.waiters.front().permits > info.capacity) {
          continue;
        }
        Op op;
        op.process = "nemesis";
        op.kind = Kind::Info;
        op.op = "stranded";
        op.key = key;
        op.value = info.waiters.front().token;
        op.timeNs = sent;
        op.message = std::to_string(monotonicNs());
        log_.append(std::move(op));
      }
    } catch (const std::exception&) {
      backend.reset();  // the next sample connects again
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace dlock::nemesis
