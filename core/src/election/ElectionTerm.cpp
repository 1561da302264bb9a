// SPDX-License-Identifier: Apache-2.0
#include "ElectionTerm.h"

#include <utility>

#include "ElectionCore.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/detail/Fork.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {

ElectionTerm::ElectionTerm(std::shared_ptr<ElectionCore> core, Lease lease)
    : core_(std::move(core)),
      token_(lease.token()),
      term_(lease.fencingToken()),
      generation_(forkGeneration()),
      lease_(std::move(lease)) {}

ElectionTerm::~ElectionTerm() {
  if (generation_ != forkGeneration() && lease_) {
    // The parent's hold: its release is the parent's business, and nothing of it is touched here.
    abandonAfterFork(new Lease(std::move(lease_)));
  }
}

bool ElectionTerm::isLeader() const noexcept {
  if (generation_ != forkGeneration() || lossReported_.load()) return false;
  std::lock_guard<std::mutex> guard(mutex_);
  try {
    return lease_.isHeld();
  } catch (...) {
    return false;
  }
}

std::chrono::steady_clock::time_point ElectionTerm::validUntil() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return lease_.validUntil();  // NotOwnerError once resigned
}

std::string ElectionTerm::where(const char* operation) const {
  return "dlock: " + std::string(operation) + " in election " + quoteKey(core_->name()) + " (term " +
         std::to_string(term_) + ") on " + core_->describe();
}

bool ElectionTerm::write(std::string_view value, const char* operation) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (!lease_ || generation_ != forkGeneration()) throw NotOwnerError(where(operation) + ": not leading");
  }
  if (!isLeader()) return false;
  return core_->records().proclaim(core_->key(), token_, term_, value);
}

bool ElectionTerm::begin(std::string_view value) {
  // A proclaim that lands after the local deadline is no term the campaign may return: the
  // server may have handed the key on meanwhile.
  return write(value, "campaign") && isLeader();
}

void ElectionTerm::proclaim(std::string_view value) {
  checkLeaderValue(value, "proclaim");
  if (write(value, "proclaim")) return;
  core_->reportLost(shared_from_this());
  throw LockLostError(where("proclaim") + ": the term had ended");
}

void ElectionTerm::resign() {
  Lease lease;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (!lease_ || generation_ != forkGeneration()) throw NotOwnerError(where("resign") + ": not leading");
    lease = std::move(lease_);  // isLeader() is false from here on
  }
  try {
    lease.release();  // the fair release hands the key to the next candidate in the same script
  } catch (const LockLostError&) {
    core_->forget(term_);
    core_->reportLost(shared_from_this());
    throw LockLostError(where("resign") + ": the term had ended");
  } catch (...) {
    std::lock_guard<std::mutex> guard(mutex_);
    lease_ = std::move(lease);  // still ours: a retry, or the lease, ends it
    throw;
  }
  core_->forget(term_);
  try {
    // Observers hear the heir's proclaim; with no heir this is their "none".
    core_->records().announce(core_->key());
  } catch (const std::exception& error) {
    logger()->warn("{}: resigned, but observers were not told ({}); they see it at the lease's end",
                   where("resign"), error.what());
  }
}

void ElectionTerm::resignQuietly() noexcept {
  if (generation_ != forkGeneration()) return;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (!lease_) return;
  }
  try {
    resign();
  } catch (const LockLostError& error) {
    logger()->debug("{}", error.what());
  } catch (const std::exception& error) {
    logger()->warn("{}: {}; the term ends at its lease", where("resign"), error.what());
    Lease dropped;  // its destructor tries the release once more, quietly
    {
      std::lock_guard<std::mutex> guard(mutex_);
      dropped = std::move(lease_);
    }
    core_->forget(term_);
  }
}

}  // namespace dlock::detail
