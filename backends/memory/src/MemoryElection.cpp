// SPDX-License-Identifier: Apache-2.0
// MemoryOperator's leader records (IElectionOperator) and MemoryElections.
#include "MemoryElection.h"

#include <utility>

#include "dlock/memory/MemoryOperator.h"

namespace dlock {
namespace detail {

bool MemoryElections::write(std::string_view key, std::string_view token, std::uint64_t term, std::string_view value) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = records_.find(key);
  if (it == records_.end()) it = records_.emplace(std::string(key), Record{}).first;
  Record& record = it->second;
  if (term < record.term) return false;  // a later term proclaimed already
  if (term != record.term) ++record.sequence;
  record.token = std::string(token);
  record.term = term;
  record.value = std::string(value);
  ++record.version;
  changed_.notify_all();
  return true;
}

MemoryElections::Record MemoryElections::read(std::string_view key) const {
  std::lock_guard<std::mutex> guard(mutex_);
  const auto it = records_.find(key);
  return it == records_.end() ? Record{} : it->second;
}

void MemoryElections::announce(std::string_view key) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = records_.find(key);
  if (it == records_.end()) it = records_.emplace(std::string(key), Record{}).first;
  ++it->second.version;
  changed_.notify_all();
}

class MemoryElections::Watch final : public ILeaderWatch {
 public:
  Watch(std::shared_ptr<MemoryElections> records, std::string key)
      : records_(std::move(records)), key_(std::move(key)), seen_(records_->read(key_).version) {}

  bool waitForChange(std::chrono::milliseconds timeout) override {
    MemoryElections& records = *records_;
    std::unique_lock<std::mutex> guard(records.mutex_);
    const Clock::time_point deadline = records.clock_->now() + timeout;
    while (!interrupted_ && version() == seen_) {
      if (records.clock_->now() >= deadline) return false;
      records.clock_->waitUntil(guard, records.changed_, deadline);
    }
    seen_ = version();
    return true;
  }

  void interrupt() noexcept override {
    std::lock_guard<std::mutex> guard(records_->mutex_);
    interrupted_ = true;
    records_->changed_.notify_all();
  }

 private:
  [[nodiscard]] std::uint64_t version() const {  // with records_->mutex_ held
    const auto it = records_->records_.find(key_);
    return it == records_->records_.end() ? 0 : it->second.version;
  }

  const std::shared_ptr<MemoryElections> records_;
  const std::string key_;
  std::uint64_t seen_;
  bool interrupted_ = false;  // guarded by records_->mutex_
};

std::unique_ptr<ILeaderWatch> MemoryElections::watch(std::string_view key) {
  return std::make_unique<Watch>(shared_from_this(), std::string(key));
}

}  // namespace detail

bool MemoryOperator::proclaim(std::string_view key, std::string_view token, std::uint64_t term,
                              std::string_view value) {
  // Records are by term and name their token: a proclaim racing its term's end writes a record
  // that describes nobody (readLeader compares the holder), and a later term's wins.
  if (holderOf(key) != token || inspect(key).fencingToken != term) return false;
  return elections().write(key, token, term, value);
}

LeaderRecord MemoryOperator::readLeader(std::string_view key) {
  LeaseInfo hold;
  std::string holder;
  while (true) {  // the hold and its holder from one instant: the same fencing token around both reads
    hold = inspect(key);
    holder = holderOf(key);
    const LeaseInfo after = inspect(key);
    if (after.fencingToken == hold.fencingToken && after.held == hold.held) break;
  }
  const detail::MemoryElections::Record record = elections().read(key);
  LeaderRecord leader;
  leader.term = record.term;
  leader.sequence = record.sequence;
  leader.value = record.value;
  leader.held = hold.held && !holder.empty() && holder == record.token && hold.fencingToken == record.term;
  if (leader.held) leader.remaining = hold.remaining;
  return leader;
}

void MemoryOperator::announce(std::string_view key) { elections().announce(key); }

std::unique_ptr<ILeaderWatch> MemoryOperator::watchLeader(std::string_view key) { return elections().watch(key); }

}  // namespace dlock
