// SPDX-License-Identifier: Apache-2.0
#include "Permits.h"

#include <utility>

#include "Acquire.h"
#include "dlock/ISemaphoreOperator.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/core/SemaphoreBuilder.h"
#include "dlock/uri.h"

namespace dlock::cli {

std::shared_ptr<dlock::Semaphore> makeSemaphore(const std::shared_ptr<dlock::IOperator>& backend,
                                                const CliOptions& options, std::chrono::milliseconds outageTolerance) {
  return dlock::SemaphoreBuilder()
      .backend(backend)
      .name(options.key)
      .permits(options.permits->capacity)
      .watchdogLease(options.ttl)
      .outageTolerance(outageTolerance)
      .build();
}

AcquiredPermits acquirePermitsInterruptibly(const std::shared_ptr<dlock::Semaphore>& semaphore,
                                            const CliOptions& options, Supervisor& supervisor) {
  const std::uint32_t count = options.permits->count;
  if (options.wait && options.wait->count() == 0) return {semaphore->tryAcquire(count), std::nullopt};
  auto [permits, interrupt] = waitInOnePiece<dlock::PermitLease>(
      [semaphore, count, wait = options.wait] {
        dlock::AcquireOptions acquire;
        acquire.waitTime = wait;
        return semaphore->acquire(count, acquire);
      },
      supervisor);
  return {std::move(permits), interrupt};
}

std::optional<SemaphoreStatus> semaphoreStatus(dlock::IOperator& backend, const CliOptions& options) {
  auto* semaphores = dynamic_cast<dlock::ISemaphoreOperator*>(&backend);
  if (semaphores == nullptr) return std::nullopt;
  const dlock::SemaphoreInfo info = semaphores->inspectSemaphore(options.key);
  if (info.capacity == 0) return std::nullopt;  // no semaphore of that name (or idle past its keys' life)
  SemaphoreStatus status;
  status.inUse = info.inUse > 0;
  std::string& text = status.text;
  text += "semaphore:     " + dlock::detail::quoteKey(options.key) + "\n";
  text += "kind:          semaphore\n";
  text += "backend:       " + dlock::redactUri(options.uri) + "\n";
  text += std::string("held:          ") + (status.inUse ? "yes" : "no") + "\n";
  text += "permits:       " + std::to_string(info.inUse) + " of " + std::to_string(info.capacity) + " in use\n";
  text += "holders:       " + std::to_string(info.holders.size()) + "\n";
  for (const auto& holder : info.holders) {
    text += "  " + std::to_string(holder.permits) + " permits, token " + tokenPrefix(holder.token) + ", fencing token " +
            std::to_string(holder.fencingToken) + ", " + formatDuration(holder.remaining) + " left\n";
  }
  text += "waiters:       " + std::to_string(info.waiters.size()) + "\n";
  for (const auto& waiter : info.waiters) {
    text += "  " + std::to_string(waiter.permits) + " permits, token " + tokenPrefix(waiter.token) + "\n";
  }
  return status;
}

std::optional<std::string> resizeSemaphore(dlock::IOperator& backend, const CliOptions& options) {
  auto* semaphores = dynamic_cast<dlock::ISemaphoreOperator*>(&backend);
  if (semaphores == nullptr) {
    throw dlock::ConfigError("dlock: resize " + dlock::detail::quoteKey(options.key) + ": " +
                             dlock::redactUri(options.uri) + " keeps no semaphores");
  }
  // A name nobody uses (a typo) gets no capacity that would refuse its first user's for a day.
  const std::uint32_t before = semaphores->inspectSemaphore(options.key).capacity;
  if (before == 0) return std::nullopt;
  const std::uint32_t admitted = semaphores->resizeSemaphore(options.key, options.capacity);
  std::string text;
  text += "semaphore:     " + dlock::detail::quoteKey(options.key) + "\n";
  text += "backend:       " + dlock::redactUri(options.uri) + "\n";
  text += "capacity:      " + std::to_string(options.capacity) + " (was " + std::to_string(before) + ")\n";
  text += "admitted:      " + std::to_string(admitted) + " waiter(s)\n";
  text += std::string("kept:          ") + kCapacityLifetime + "\n";
  return text;
}

}  // namespace dlock::cli
