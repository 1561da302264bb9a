// SPDX-License-Identifier: Apache-2.0
#include "ElectionObserver.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "ElectionCore.h"
#include "dlock/Validation.h"
#include "dlock/detail/Backoff.h"
#include "dlock/detail/Fork.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {

using std::chrono::milliseconds;

namespace {
// With no live term nothing ends on its own: only a message (or a reconnect) changes anything.
constexpr milliseconds kIdleWait = std::chrono::hours(1);
}  // namespace

ElectionObserver::ElectionObserver(std::shared_ptr<ElectionCore> core, Election::ObserveHandler handler)
    : core_(std::move(core)), handler_(std::move(handler)) {}

ElectionObserver::~ElectionObserver() { stop(); }

void ElectionObserver::start() {
  watch_ = core_->records().watchLeader(core_->key());  // before the first read: no change missed
  generation_ = forkGeneration();
  thread_ = std::thread([self = shared_from_this()] { self->run(); });
}

void ElectionObserver::stop() noexcept {
  stopping_.store(true);
  if (!thread_.joinable()) return;
  if (generation_ != forkGeneration()) {
    // The thread is the parent's: the child has none to join, nor may it touch the watch.
    abandonAfterFork(new std::thread(std::move(thread_)));
    abandonAfterFork(watch_.release());
    return;
  }
  watch_->interrupt();
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();  // stopped by its own callback: it ends after the callback returns
  } else {
    thread_.join();
  }
}

void ElectionObserver::run() {
  Clock& clock = *core_->clock();
  Backoff retry{milliseconds(10), milliseconds(1000)};
  while (!stopping_.load()) {
    const Clock::time_point sentAt = clock.now();
    LeaderRecord record;
    try {
      record = core_->records().readLeader(core_->key());
    } catch (const std::exception& error) {
      logger()->debug("dlock: observing election {}: {}", quoteKey(core_->name()), error.what());
      (void)watch_->waitForChange(retry.next());
      continue;
    }
    retry.reset();
    if (auto info = change(record)) deliver(*info);
    milliseconds wait = kIdleWait;
    if (record.held) {
      // Read again as the term ends unrenewed: "none" within a round trip of its end.
      const auto elapsed = std::chrono::duration_cast<milliseconds>(clock.now() - sentAt);
      wait = record.remaining - elapsed + milliseconds(1);
      if (wait <= milliseconds(0)) continue;  // it may have ended already
    }
    (void)watch_->waitForChange(wait);
  }
  clock.forgetWaiter();
}

std::optional<LeaderInfo> ElectionObserver::change(const LeaderRecord& record) {
  if (reported_ && record.term < last_.term) return std::nullopt;  // an older view (a stale replica)
  LeaderInfo now;
  now.hasLeader = record.held;
  now.term = record.term;
  if (record.held) now.value = record.value;
  const std::uint64_t newTerms = record.sequence > lastSequence_ ? record.sequence - lastSequence_ : 0;
  lastSequence_ = std::max(lastSequence_, record.sequence);
  if (!reported_) {
    reported_ = true;
    last_ = now;
    return now;
  }
  const bool newTerm = now.hasLeader && (!last_.hasLeader || now.term != last_.term);
  now.skippedTerms = newTerm && newTerms > 0 ? newTerms - 1 : newTerms;
  const bool changed = newTerm || now.hasLeader != last_.hasLeader || now.value != last_.value ||
                       now.skippedTerms > 0;
  if (!changed) return std::nullopt;
  last_ = now;
  return now;
}

void ElectionObserver::deliver(const LeaderInfo& info) noexcept {
  try {
    handler_(info);
  } catch (const std::exception& error) {
    logger()->warn("dlock: observing election {}: the handler threw: {}", quoteKey(core_->name()), error.what());
  } catch (...) {
    logger()->warn("dlock: observing election {}: the handler threw", quoteKey(core_->name()));
  }
}

}  // namespace dlock::detail
