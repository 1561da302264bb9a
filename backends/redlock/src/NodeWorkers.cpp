// SPDX-License-Identifier: Apache-2.0
#include "NodeWorkers.h"

#include <exception>
#include <utility>

#include "dlock/detail/Log.h"

namespace dlock::detail {

NodeWorkers::NodeWorkers(std::size_t nodes, std::size_t lanesPerNode)
    : lanesPerNode_(lanesPerNode),
      threads_([count = nodes * lanesPerNode] { return std::make_shared<Threads>(count); }) {}

NodeWorkers::Threads::Threads(std::size_t count) {
  workers.reserve(count);
  try {
    for (std::size_t i = 0; i < count; ++i) {
      workers.push_back(std::make_unique<Worker>());
      Worker& worker = *workers.back();
      worker.thread = std::thread([&worker] { run(worker); });
    }
  } catch (...) {
    // Could not start every thread: stop the ones that did start before giving up.
    stop();
    throw;
  }
}

NodeWorkers::Threads::~Threads() { stop(); }

void NodeWorkers::Threads::stop() noexcept {
  for (auto& worker : workers) {
    {
      std::lock_guard<std::mutex> guard(worker->mutex);
      worker->stopping = true;
    }
    worker->ready.notify_all();
  }
  for (auto& worker : workers) {
    if (worker->thread.joinable()) worker->thread.join();
    worker->queue.clear();  // the thread has ended: nobody else touches the queue now
  }
}

void NodeWorkers::post(std::size_t node, std::size_t lane, Task task) {
  Worker& worker = *threads_->workers.at(node * lanesPerNode_ + lane);
  {
    std::lock_guard<std::mutex> guard(worker.mutex);
    worker.queue.push_back(std::move(task));
  }
  worker.ready.notify_one();
}

void NodeWorkers::run(Worker& worker) {
  std::unique_lock<std::mutex> guard(worker.mutex);
  while (true) {
    worker.ready.wait(guard, [&] { return worker.stopping || !worker.queue.empty(); });
    if (worker.stopping) return;
    Task task = std::move(worker.queue.front());
    worker.queue.pop_front();
    guard.unlock();
    try {
      task();
    } catch (const std::exception& error) {
      logger()->warn("dlock: a redlock node task failed: {}", error.what());
    } catch (...) {
      logger()->warn("dlock: a redlock node task failed");
    }
    task = nullptr;  // release what the task holds before waiting again
    guard.lock();
  }
}

}  // namespace dlock::detail
