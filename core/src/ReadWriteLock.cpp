// SPDX-License-Identifier: Apache-2.0
#include "dlock/core/ReadWriteLock.h"

#include <utility>

#include "ReadWriteCore.h"
#include "ReadWriteSide.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/core/RequestIdHolder.h"

namespace dlock {

ReadWriteLock::ReadWriteLock(std::shared_ptr<detail::ReadWriteCore> core)
    : owners_(std::make_shared<detail::ReadWriteOwners>(std::move(core))),
      core_(owners_->core),
      read_(std::make_shared<detail::ReadWriteSide>(owners_, ReadWriteMode::Read)),
      write_(std::make_shared<detail::ReadWriteSide>(owners_, ReadWriteMode::Write)) {}

ReadWriteLock::~ReadWriteLock() = default;

bool ReadWriteLock::tryUpgrade(std::string_view key) {
  detail::checkKey(key, "tryUpgrade");
  const std::uint64_t writeId = core_->sideId(ReadWriteMode::Write);
  if (RequestIdHolder::Hold* write = RequestIdHolder::find(writeId, key)) {
    if (!core_->isValid(*write->lease)) {
      throw LockLostError("dlock: tryUpgrade " + detail::quoteKey(key) + " on " + core_->describe() +
                          ": this thread's write lease has ended");
    }
    ++write->count;
    return true;
  }
  RequestIdHolder::Hold* read = RequestIdHolder::find(core_->sideId(ReadWriteMode::Read), key);
  if (read == nullptr) {
    throw NotOwnerError("dlock: tryUpgrade " + detail::quoteKey(key) + " on " + core_->describe() +
                        ": this thread holds no read lock of it");
  }
  if (!core_->isValid(*read->lease)) {
    throw LockLostError("dlock: tryUpgrade " + detail::quoteKey(key) + " on " + core_->describe() +
                        ": this thread's read lease has ended");
  }
  std::shared_ptr<detail::LeaseState> upgraded = core_->tryUpgrade(*read->lease);
  if (!upgraded) return false;
  read->lease = upgraded;  // the read hold is carried by the write now (see ReadWriteSide.h)
  RequestIdHolder::insert(writeId, key, std::move(upgraded));
  return true;
}

ReadWriteInfo ReadWriteLock::inspect(std::string_view key) { return core_->inspect(key); }

}  // namespace dlock
