// SPDX-License-Identifier: Apache-2.0
#include "LossNotifier.h"

#include <utility>

#include "dlock/Validation.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {

LossNotifier::~LossNotifier() { stop(); }

void LossNotifier::setHandler(ILock::LostHandler handler) {
  std::lock_guard<std::mutex> guard(mutex_);
  handler_ = std::move(handler);
}

void LossNotifier::notify(std::string key, std::uint64_t fencingToken) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (stopping_ || !handler_) return;
    queue_.push_back(Notice{std::move(key), fencingToken});
    if (!thread_.joinable()) thread_ = std::thread([self = shared_from_this()] { self->run(); });
  }
  wake_.notify_one();
}

void LossNotifier::stop() {
  std::thread thread;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
    queue_.clear();
    if (thread_.joinable() && thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();  // a handler dropped the last reference: this thread ends once it returns
    } else {
      thread = std::move(thread_);
    }
  }
  wake_.notify_all();
  if (thread.joinable()) thread.join();
}

void LossNotifier::run() {
  std::unique_lock<std::mutex> guard(mutex_);
  while (true) {
    wake_.wait(guard, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    const Notice notice = std::move(queue_.front());
    queue_.pop_front();
    ILock::LostHandler handler = handler_;  // a copy: the handler may destroy the lock, and this with it
    guard.unlock();
    try {
      if (handler) handler(notice.key, notice.fencingToken);
    } catch (const std::exception& error) {
      logger()->warn("dlock: the lock-lost handler threw for {}: {}", quoteKey(notice.key), error.what());
    } catch (...) {
      logger()->warn("dlock: the lock-lost handler threw for {}", quoteKey(notice.key));
    }
    handler = nullptr;  // before the lock is taken again: it may hold the last reference to the lock
    guard.lock();
  }
}

}  // namespace dlock::detail
