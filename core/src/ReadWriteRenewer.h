// SPDX-License-Identifier: Apache-2.0
// ReadWriteRenewer.h — the read-write lock's LeaseRenewer: read and write holds (LeaseKind Read,
// Write) renewed in one IReadWriteOperator::extendReadWriteAll call, each hold by its own token and
// mode, so a reader renews only its own read hold (never another's: redisson PR #7098) and a read
// hold taken by a downgrade is renewed like any other (redisson#4217).
// Owner: the read-write lock's watchdog. Thread safety: thread-safe (the backend is).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "LeaseRenewer.h"
#include "dlock/IReadWriteOperator.h"

namespace dlock::detail {

class ReadWriteRenewer final : public LeaseRenewer {
 public:
  // `rw` is `backend`'s; `backend` keeps it alive.
  ReadWriteRenewer(std::shared_ptr<IOperator> backend, IReadWriteOperator& rw) : backend_(std::move(backend)), rw_(rw) {}

  std::vector<ExtendResult> renewAll(const std::vector<std::shared_ptr<LeaseState>>& batch,
                                     std::chrono::milliseconds ttl) override {
    std::vector<ReadWriteLease> holds;
    holds.reserve(batch.size());
    for (const auto& lease : batch) {
      holds.push_back(ReadWriteLease{lease->key, lease->token,
                                     lease->kind == LeaseKind::Write ? ReadWriteMode::Write : ReadWriteMode::Read});
    }
    return rw_.extendReadWriteAll(holds, ttl);
  }
  [[nodiscard]] std::string describe() const override { return backend_->describe(); }

 private:
  const std::shared_ptr<IOperator> backend_;
  IReadWriteOperator& rw_;  // backend_'s
};

}  // namespace dlock::detail
