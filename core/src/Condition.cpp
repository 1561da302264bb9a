// SPDX-License-Identifier: Apache-2.0
#include "dlock/core/Condition.h"

#include <utility>

#include "LockCore.h"
#include "dlock/IConditionOperator.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/core/RequestIdHolder.h"

namespace dlock {

Condition::Condition(std::shared_ptr<detail::LockCore> core, std::string key, std::string name)
    : core_(std::move(core)), key_(std::move(key)), name_(std::move(name)) {}

bool Condition::awaitFor(std::chrono::milliseconds timeout, const CancelToken& cancel) {
  if (timeout.count() <= 0) return wait(Deadline::min(), cancel);
  const auto now = std::chrono::steady_clock::now();
  if (timeout >= std::chrono::duration_cast<std::chrono::milliseconds>(Deadline::max() - now)) {
    return wait(Deadline::max(), cancel);
  }
  return wait(now + timeout, cancel);
}

void Condition::signal(bool all) {
  const RequestIdHolder::Hold* hold = RequestIdHolder::find(core_->id(), key_);
  const char* operation = all ? "signalAll" : "signal";
  if (hold == nullptr) {
    throw NotOwnerError(std::string("dlock: ") + operation + " " + detail::quoteKey(key_) + " on " + core_->describe() +
                        ": the key is not held by this thread");
  }
  const detail::LockCapabilities& capabilities = core_->capabilities();
  IConditionOperator& conditions = *capabilities.condition;
  const SignalResult result = all ? conditions.signalAll(key_, name_, hold->lease->token, capabilities.conditionLock)
                                  : conditions.signal(key_, name_, hold->lease->token, capabilities.conditionLock);
  if (!result.owner) {
    throw NotOwnerError(std::string("dlock: ") + operation + " " + detail::quoteKey(key_) + " on " + core_->describe() +
                        ": this thread's lease of the key has ended; nothing was signalled");
  }
}

bool Condition::wait(Deadline /*deadline*/, const CancelToken& /*cancel*/) {
  throw ConfigError("dlock: Condition::await is not built yet");
}

}  // namespace dlock
