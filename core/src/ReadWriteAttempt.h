// SPDX-License-Identifier: Apache-2.0
// ReadWriteAttempt.h — the attempt of a read or a write hold: the fair lock's attempt
// (FairAttempt.h) over one side of the backend's read-write queue (ReadWriteQueue.h, behind a
// FairBackend). A waiter holds its own place in the one queue of the name, renewed by its tries;
// it is admitted by a release's hand-off (a writer alone, or every reader at the head) and told on
// its process's grant channel; a grant counts only once the server confirms the hold (an extend of
// this mode's hold); a waiter that gives up leaves the queue, passing on a hand-off that raced it.
// Writer preference is the backend's: once a writer waits, a new reader queues behind it.
// Owner: one acquire call. Thread safety: not thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "FairAttempt.h"
#include "dlock/IReadWriteOperator.h"

namespace dlock::detail {

class ReadWriteAttempt final : public Attempt {
 public:
  // `tools.backend` is `side` (whose extend renews this mode's hold); `waiterLease` zero for a
  // single try; `token` a place held already (an async waiter's), empty for a new one.
  ReadWriteAttempt(const AttemptTools& tools, FairBackend& side, ReadWriteMode mode, std::chrono::milliseconds waiterLease,
                   std::string token = {})
      : fair_(tools, side, waiterLease, std::move(token)), mode_(mode) {}

  [[nodiscard]] std::chrono::milliseconds placeRenewal() const noexcept override { return fair_.placeRenewal(); }
  TryResult tryAcquire(const WaitState& state) override { return fair_.tryAcquire(state); }
  bool join(const WaitState& state) override { return fair_.join(state); }
  std::optional<Held> await(const WaitState& state, const Pause& pause) override { return fair_.await(state, pause); }
  void leave(const WaitState& state) noexcept override { fair_.leave(state); }

  [[nodiscard]] std::string takeToken() noexcept override { return fair_.takeToken(); }
  [[nodiscard]] const char* kind() const noexcept override {
    return mode_ == ReadWriteMode::Read ? "read, " : "write, ";
  }

 private:
  FairAttempt fair_;
  const ReadWriteMode mode_;
};

}  // namespace dlock::detail
