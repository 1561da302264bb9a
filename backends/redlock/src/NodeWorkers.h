// SPDX-License-Identifier: Apache-2.0
// NodeWorkers.h — the fixed worker threads through which RedlockOperator talks to its nodes.
//
// Each node has its own threads (`lanesPerNode` of them), each with its own queue, so a slow or
// dead node holds up only its own work, never another node's. post(node, lane, task) runs
// `task` on thread `lane` of `node`; tasks posted to one (node, lane) run one at a time in the
// order posted, which the operator relies on: a release posted after an acquire of the same key
// reaches that node after the acquire finished. A forked child starts its own threads at its
// first post(); the parent's, and the tasks queued for them, are left behind.
// Owner: one RedlockOperator. Thread safety: thread-safe.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "dlock/detail/Fork.h"

namespace dlock::detail {

class NodeWorkers {
 public:
  // A task must not throw; NodeWorkers logs and drops an exception that escapes one.
  using Task = std::function<void()>;

  NodeWorkers(std::size_t nodes, std::size_t lanesPerNode);
  NodeWorkers(const NodeWorkers&) = delete;
  NodeWorkers& operator=(const NodeWorkers&) = delete;
  // Finishes the tasks running now, drops the queued ones, joins every thread.
  ~NodeWorkers() = default;

  // `lane` < lanesPerNode.
  void post(std::size_t node, std::size_t lane, Task task);

 private:
  struct Worker {
    std::mutex mutex;
    std::condition_variable ready;
    std::deque<Task> queue;  // guarded by mutex
    bool stopping = false;   // guarded by mutex
    std::thread thread;
  };

  // The threads of one process, started together and stopped together.
  struct Threads {
    explicit Threads(std::size_t count);
    Threads(const Threads&) = delete;
    Threads& operator=(const Threads&) = delete;
    ~Threads();
    void stop() noexcept;

    std::vector<std::unique_ptr<Worker>> workers;  // node * lanesPerNode_ + lane
  };

  static void run(Worker& worker);

  const std::size_t lanesPerNode_;
  ForkLocal<Threads> threads_;
};

}  // namespace dlock::detail
