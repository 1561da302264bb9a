// SPDX-License-Identifier: Apache-2.0
#include "ElectionCore.h"

#include <utility>
#include <vector>

#include "ElectionTerm.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {

void checkLeaderValue(std::string_view value, const char* operation) {
  if (value.size() > kMaxLeaderValueBytes) {
    throw InvalidArgumentError("dlock: " + std::string(operation) + ": a leader's value has " +
                               std::to_string(value.size()) + " bytes, at most " +
                               std::to_string(kMaxLeaderValueBytes) + " allowed");
  }
}

ElectionCore::ElectionCore(std::string name, std::shared_ptr<IOperator> backend, IElectionOperator& records,
                           std::shared_ptr<ILock> lock, std::shared_ptr<Clock> clock)
    : name_(std::move(name)),
      key_("election:" + name_),
      backend_(std::move(backend)),
      records_(records),
      lock_(std::move(lock)),
      clock_(std::move(clock)) {}

ElectionCore::~ElectionCore() = default;

void ElectionCore::start() {
  // Weak: the lock's notifier must not keep its own election alive.
  lock_->onLockLost([weak = weak_from_this()](std::string_view /*key*/, std::uint64_t term) {
    if (const auto core = weak.lock()) core->lockLost(term);
  });
}

std::string ElectionCore::describe() const { return backend_->describe(); }

Leadership ElectionCore::campaign(std::string_view value, const CancelToken& cancel) {
  checkLeaderValue(value, "campaign");
  while (true) {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      if (closed_) throw InterruptedError("dlock: campaign in election " + quoteKey(name_) + ": closed");
    }
    AcquireOptions options;
    options.cancel = cancel;
    // The fair lock's own wait: its attempts settle a lost reply by asking the server, never by
    // sending the acquire again blindly, and a cancel leaves neither a place nor a hold.
    Lease hold = lock_->acquire(key_, options);
    auto term = std::make_shared<ElectionTerm>(shared_from_this(), std::move(hold));
    if (!keep(term)) {
      term->resignQuietly();
      throw InterruptedError("dlock: campaign in election " + quoteKey(name_) + ": closed");
    }
    bool begun = false;
    try {
      begun = term->begin(value);
    } catch (...) {
      forget(term->term());
      term->resignQuietly();
      throw;
    }
    if (begun) {
      termsStarted_.fetch_add(1, std::memory_order_relaxed);
      return Leadership(term, true);
    }
    logger()->debug("dlock: campaign in election {} on {}: term {} ended before it began; queueing again",
                    quoteKey(name_), describe(), term->term());
    forget(term->term());
    term->resignQuietly();
  }
}

bool ElectionCore::keep(const std::shared_ptr<ElectionTerm>& term) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (closed_) return false;
  terms_[term->term()] = term;
  return true;
}

void ElectionCore::forget(std::uint64_t term) {
  std::lock_guard<std::mutex> guard(mutex_);
  terms_.erase(term);
}

void ElectionCore::onLost(Election::LostHandler handler) {
  auto shared = handler ? std::make_shared<const Election::LostHandler>(std::move(handler)) : nullptr;
  std::lock_guard<std::mutex> guard(mutex_);
  handler_ = std::move(shared);
}

void ElectionCore::lockLost(std::uint64_t term) {
  std::shared_ptr<ElectionTerm> lost;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    const auto it = terms_.find(term);
    if (it == terms_.end()) return;  // resigned meanwhile, or a campaign's term not begun
    lost = it->second.lock();
  }
  if (lost) reportLost(lost);
}

void ElectionCore::reportLost(const std::shared_ptr<ElectionTerm>& term) {
  if (!term->claimLossReport()) return;
  termsLost_.fetch_add(1, std::memory_order_relaxed);
  logger()->warn("dlock: election {} on {}: term {} lost", quoteKey(name_), describe(), term->term());
  std::shared_ptr<const Election::LostHandler> handler;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    handler = handler_;
  }
  if (!handler) return;
  try {
    (*handler)(Leadership(term, false));
  } catch (const std::exception& error) {
    logger()->warn("dlock: election {}: the lost handler threw: {}", quoteKey(name_), error.what());
  } catch (...) {
    logger()->warn("dlock: election {}: the lost handler threw", quoteKey(name_));
  }
}

std::optional<LeaderInfo> ElectionCore::leader() {
  const LeaderRecord record = records_.readLeader(key_);
  if (!record.held) return std::nullopt;
  LeaderInfo info;
  info.hasLeader = true;
  info.term = record.term;
  info.value = record.value;
  return info;
}

bool ElectionCore::leading() const noexcept {
  std::vector<std::shared_ptr<ElectionTerm>> terms;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    for (const auto& [number, weak] : terms_) {
      if (auto term = weak.lock()) terms.push_back(std::move(term));
    }
  }
  for (const auto& term : terms) {
    if (term->isLeader()) return true;
  }
  return false;
}

void ElectionCore::close() noexcept {
  std::vector<std::shared_ptr<ElectionTerm>> terms;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (closed_) return;
    closed_ = true;
    for (const auto& [number, weak] : terms_) {
      if (auto term = weak.lock()) terms.push_back(std::move(term));
    }
  }
  for (const auto& term : terms) term->resignQuietly();
  lock_->close();  // ends the campaigns waiting in the queue
}

}  // namespace dlock::detail
