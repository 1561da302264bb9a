// SPDX-License-Identifier: Apache-2.0
// Election, Leadership and ElectionWatch: handles on ElectionCore, ElectionTerm and ElectionObserver.
#include "dlock/core/Election.h"

#include <utility>

#include "ElectionCore.h"
#include "ElectionObserver.h"
#include "ElectionTerm.h"
#include "dlock/LockError.h"

namespace dlock {

Leadership::Leadership(std::shared_ptr<detail::ElectionTerm> term, bool owning) noexcept
    : term_(std::move(term)), owning_(owning) {}

Leadership::Leadership(Leadership&& other) noexcept
    : term_(std::move(other.term_)), owning_(std::exchange(other.owning_, false)) {}

Leadership& Leadership::operator=(Leadership&& other) noexcept {
  if (this != &other) {
    if (owning_ && term_) term_->resignQuietly();
    term_ = std::move(other.term_);
    owning_ = std::exchange(other.owning_, false);
  }
  return *this;
}

Leadership::~Leadership() {
  if (owning_ && term_) term_->resignQuietly();
}

const detail::ElectionTerm& Leadership::term() const {
  if (!term_) throw NotOwnerError("dlock: an empty Leadership has no term");
  return *term_;
}

bool Leadership::isLeader() const noexcept { return term_ && term_->isLeader(); }

std::uint64_t Leadership::fencingToken() const { return term().term(); }

std::chrono::steady_clock::time_point Leadership::validUntil() const { return term().validUntil(); }

void Leadership::proclaim(std::string_view value) {
  if (!term_) throw NotOwnerError("dlock: proclaim of an empty Leadership");
  term_->proclaim(value);
}

void Leadership::resign() {
  if (!term_) throw NotOwnerError("dlock: resign of an empty Leadership");
  if (!owning_) throw NotOwnerError("dlock: resign of a lost term's notice");
  try {
    term_->resign();
  } catch (const LockLostError&) {
    term_.reset();
    owning_ = false;
    throw;
  }
  term_.reset();
  owning_ = false;
}

ElectionWatch::ElectionWatch(std::shared_ptr<detail::ElectionObserver> observer) noexcept
    : observer_(std::move(observer)) {}

ElectionWatch::ElectionWatch(ElectionWatch&& other) noexcept = default;

ElectionWatch& ElectionWatch::operator=(ElectionWatch&& other) noexcept {
  if (this != &other) {
    stop();
    observer_ = std::move(other.observer_);
  }
  return *this;
}

ElectionWatch::~ElectionWatch() { stop(); }

void ElectionWatch::stop() noexcept {
  if (observer_) observer_->stop();
  observer_.reset();
}

Election::Election(std::shared_ptr<detail::ElectionCore> core) : core_(std::move(core)) {}

Election::~Election() { close(); }

Leadership Election::campaign(std::string_view value, const CancelToken& cancel) {
  return core_->campaign(value, cancel);
}

void Election::onLost(LostHandler handler) { core_->onLost(std::move(handler)); }

ElectionWatch Election::observe(ObserveHandler handler) {
  if (!handler) throw InvalidArgumentError("dlock: observe of election '" + core_->name() + "': no handler");
  auto observer = std::make_shared<detail::ElectionObserver>(core_, std::move(handler));
  observer->start();
  return ElectionWatch(std::move(observer));
}

std::optional<LeaderInfo> Election::leader() { return core_->leader(); }

void Election::close() noexcept { core_->close(); }

const std::string& Election::name() const noexcept { return core_->name(); }

bool Election::leading() const noexcept { return core_->leading(); }

std::uint64_t Election::termsStarted() const noexcept { return core_->termsStarted(); }

std::uint64_t Election::termsLost() const noexcept { return core_->termsLost(); }

}  // namespace dlock
