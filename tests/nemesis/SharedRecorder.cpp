// SPDX-License-Identifier: Apache-2.0
#include "SharedRecorder.h"

#include <dlock/LockError.h>

namespace dlock::nemesis {
namespace {

using std::chrono::milliseconds;

std::map<std::string, std::string>& lastOwners() {
  static thread_local std::map<std::string, std::string> owners;  // by key
  return owners;
}

const char* modeName(ReadWriteMode mode) { return mode == ReadWriteMode::Read ? "read" : "write"; }

milliseconds validFor(milliseconds reported, milliseconds ttl) { return reported.count() > 0 ? std::min(reported, ttl) : ttl; }

// A waiter's grant watch that tells the recorder of each grant it hears.
class HeardGrants final : public IGrantWatch {
 public:
  HeardGrants(std::unique_ptr<IGrantWatch> inner, std::function<void()> heard)
      : inner_(std::move(inner)), heard_(std::move(heard)) {}

  Grant waitForGrant(milliseconds timeout) override {
    Grant grant = inner_->waitForGrant(timeout);
    if (grant.kind == Grant::Kind::Granted) heard_();
    return grant;
  }

 private:
  std::unique_ptr<IGrantWatch> inner_;
  std::function<void()> heard_;
};

}  // namespace

SharedRecorder::SharedRecorder(std::shared_ptr<IOperator> backend, std::shared_ptr<IReadWriteOperator> readWrite,
                               std::shared_ptr<ISemaphoreOperator> semaphores, Sink sink)
    : backend_(std::move(backend)), readWrite_(std::move(readWrite)), semaphores_(std::move(semaphores)),
      sink_(std::move(sink)) {}

std::string SharedRecorder::lastOwner(const std::string& key) {
  const auto found = lastOwners().find(key);
  return found == lastOwners().end() ? std::string() : found->second;
}

IReadWriteOperator& SharedRecorder::readWrite() const {
  if (!readWrite_) throw ConfigError("dlock: " + backend_->describe() + " has no read-write lock");
  return *readWrite_;
}

ISemaphoreOperator& SharedRecorder::semaphores() const {
  if (!semaphores_) throw ConfigError("dlock: " + backend_->describe() + " has no semaphore");
  return *semaphores_;
}

std::string SharedRecorder::readWriteUnsupported() const {
  return readWrite_ ? readWrite_->readWriteUnsupported() : backend_->describe() + " has no read-write lock";
}

std::string SharedRecorder::semaphoreUnsupported() const {
  return semaphores_ ? semaphores_->semaphoreUnsupported() : backend_->describe() + " has no semaphore";
}

void SharedRecorder::record(const char* op, std::string_view key, std::string_view token, std::string value,
                            std::int64_t timeNs) const {
  Op record;
  record.kind = Kind::Info;
  record.op = op;
  record.key = std::string(key);
  record.message = std::string(token);
  record.value = std::move(value);
  record.timeNs = timeNs;
  sink_(std::move(record));
}

void SharedRecorder::attempted(std::string_view key, std::string_view token, const char* mode, std::int64_t sentNs,
                               bool acquired, std::uint32_t position, milliseconds validity, milliseconds ttl) {
  bool writersRead = false;  // the first step of a downgrade: no reader admitted past a queue
  if (acquired) {
    const Id id{std::string(key), std::string(token)};
    {
      const std::lock_guard<std::mutex> guard(mutex_);
      claims_.erase(id);
      writersRead = std::string_view(mode) == "read" && writers_.count(id) > 0;
    }
    record("lease", key, token, std::to_string(validFor(validity, ttl).count()), sentNs);
    lastOwners()[std::string(key)] = std::string(token);
    if (std::string_view(mode) == "write") wrote(id, true);
  }
  if (writersRead) return;
  record("attempt", key, token,
         std::string(acquired ? "taken " : "queued ") + std::to_string(sentNs) + " " + std::to_string(acquired ? 0 : position) +
             " " + mode + " " + std::to_string(acquired ? validity.count() : 0),
         monotonicNs());
}

void SharedRecorder::confirmed(std::string_view key, std::string_view token, const char* mode, std::int64_t sentNs,
                               milliseconds validity, bool claim) {
  record("lease", key, token, std::to_string(validity.count()), sentNs);
  if (!claim) return;
  {
    const std::lock_guard<std::mutex> guard(mutex_);
    if (claims_.erase({std::string(key), std::string(token)}) == 0) return;
  }
  lastOwners()[std::string(key)] = std::string(token);
  if (std::string_view(mode) == "write") wrote({std::string(key), std::string(token)}, true);
  record("attempt", key, token, "granted " + std::to_string(sentNs) + " 0 " + mode + " 0", monotonicNs());
}

void SharedRecorder::wrote(const Id& id, bool holds) {
  const std::lock_guard<std::mutex> guard(mutex_);
  if (holds) {
    writers_.insert(id);
  } else {
    writers_.erase(id);
  }
}

void SharedRecorder::heard(const std::string& key, const std::string& token) {
  const std::lock_guard<std::mutex> guard(mutex_);
  claims_[{key, token}] = true;
}

FairAcquireResult SharedRecorder::doAcquire(std::string_view name, std::string_view token, ReadWriteMode mode,
                                            milliseconds ttl, milliseconds waiterLease) {
  const std::int64_t sent = monotonicNs();
  const FairAcquireResult result = mode == ReadWriteMode::Read ? readWrite().acquireRead(name, token, ttl, waiterLease)
                                                               : readWrite().acquireWrite(name, token, ttl, waiterLease);
  attempted(name, token, modeName(mode), sent, result.acquired, result.position, result.validity, ttl);
  return result;
}

ReleaseResult SharedRecorder::doRelease(std::string_view name, std::string_view token, ReadWriteMode mode) {
  if (mode == ReadWriteMode::Write) wrote({std::string(name), std::string(token)}, false);
  return mode == ReadWriteMode::Read ? readWrite().releaseRead(name, token) : readWrite().releaseWrite(name, token);
}

bool SharedRecorder::doDowngrade(std::string_view name, std::string_view token, milliseconds ttl) {
  const std::int64_t sent = monotonicNs();
  const bool downgraded = readWrite().downgrade(name, token, ttl);
  if (downgraded) {
    wrote({std::string(name), std::string(token)}, false);
    confirmed(name, token, "read", sent, ttl, false);
  }
  return downgraded;
}

FairAcquireResult SharedRecorder::doTryUpgrade(std::string_view name, std::string_view token, milliseconds ttl) {
  const std::int64_t sent = monotonicNs();
  const FairAcquireResult result = readWrite().tryUpgrade(name, token, ttl);
  if (result.acquired) {
    wrote({std::string(name), std::string(token)}, true);
    confirmed(name, token, "write", sent, validFor(result.validity, ttl), false);
  }
  return result;
}

bool SharedRecorder::doExtend(const ReadWriteLease& lease, milliseconds ttl) {
  const std::int64_t sent = monotonicNs();
  const bool extended = readWrite().extendReadWrite(lease, ttl);
  if (extended) confirmed(lease.name, lease.token, modeName(lease.mode), sent, ttl, true);
  return extended;
}

std::vector<ExtendResult> SharedRecorder::doExtendAll(const std::vector<ReadWriteLease>& leases, milliseconds ttl) {
  const std::int64_t sent = monotonicNs();
  std::vector<ExtendResult> results = readWrite().extendReadWriteAll(leases, ttl);
  for (std::size_t i = 0; i < results.size() && i < leases.size(); ++i) {
    if (results[i].extended) {
      confirmed(leases[i].name, leases[i].token, modeName(leases[i].mode), sent, validFor(results[i].validity, ttl), false);
    }
  }
  return results;
}

bool SharedRecorder::doLeave(std::string_view name, std::string_view token, ReadWriteMode mode, milliseconds ttl) {
  try {
    return readWrite().leaveReadWriteQueue(name, token, mode, ttl);
  } catch (const LockError&) {
    record("leave-failed", name, token, "", monotonicNs());
    throw;
  }
}

std::unique_ptr<IGrantWatch> SharedRecorder::doWatch(std::string_view name, std::string_view token) {
  return std::make_unique<HeardGrants>(readWrite().watchReadWriteGrants(name, token),
                                       [this, key = std::string(name), token = std::string(token)] { heard(key, token); });
}

ReadWriteInfo SharedRecorder::doInspect(std::string_view name) { return readWrite().inspectReadWrite(name); }

SemaphoreAcquireResult SharedRecorder::doAcquirePermits(std::string_view name, std::string_view token,
                                                        std::uint32_t permits, std::uint32_t capacity, milliseconds lease,
                                                        milliseconds waiterLease) {
  const std::int64_t sent = monotonicNs();
  const SemaphoreAcquireResult result = semaphores().acquirePermits(name, token, permits, capacity, lease, waiterLease);
  attempted(name, token, "permits", sent, result.acquired, result.position, result.validity, lease);
  return result;
}

ReleaseResult SharedRecorder::doReleasePermits(std::string_view name, std::string_view token) {
  return semaphores().releasePermits(name, token);
}

bool SharedRecorder::doExtendPermits(std::string_view name, std::string_view token, milliseconds lease) {
  const std::int64_t sent = monotonicNs();
  const bool extended = semaphores().extendPermits(name, token, lease);
  if (extended) confirmed(name, token, "permits", sent, lease, true);
  return extended;
}

std::vector<ExtendResult> SharedRecorder::doExtendPermitsAll(const std::vector<LeaseRef>& leases, milliseconds lease) {
  const std::int64_t sent = monotonicNs();
  std::vector<ExtendResult> results = semaphores().extendPermitsAll(leases, lease);
  for (std::size_t i = 0; i < results.size() && i < leases.size(); ++i) {
    if (results[i].extended) confirmed(leases[i].key, leases[i].token, "permits", sent, validFor(results[i].validity, lease), false);
  }
  return results;
}

bool SharedRecorder::doLeavePermitQueue(std::string_view name, std::string_view token) {
  try {
    return semaphores().leavePermitQueue(name, token);
  } catch (const LockError&) {
    record("leave-failed", name, token, "", monotonicNs());
    throw;
  }
}

std::unique_ptr<IGrantWatch> SharedRecorder::doWatchPermitGrants(std::string_view name, std::string_view token) {
  return std::make_unique<HeardGrants>(semaphores().watchPermitGrants(name, token),
                                       [this, key = std::string(name), token = std::string(token)] { heard(key, token); });
}

std::uint32_t SharedRecorder::doResizeSemaphore(std::string_view name, std::uint32_t capacity) {
  return semaphores().resizeSemaphore(name, capacity);
}

SemaphoreInfo SharedRecorder::doInspectSemaphore(std::string_view name) { return semaphores().inspectSemaphore(name); }

}  // namespace dlock::nemesis
