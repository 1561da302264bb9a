// SPDX-License-Identifier: Apache-2.0
#include "dlock/core/DefaultLock.h"

#include <pthread.h>

#include <mutex>
#include <utility>

#include "dlock/LockError.h"
#include "dlock/detail/Fork.h"

namespace dlock {
namespace {

struct DefaultLockSlot {
  std::mutex mutex;
  std::shared_ptr<ILock> lock;  // guarded by mutex
};

DefaultLockSlot& slot() {
  static DefaultLockSlot instance;
  // Held across fork(), so a child never finds it locked by a thread of the parent's; the child
  // keeps the default lock, which then works there as new (see DESIGN.md, "After fork()").
  static const int forkSafe = ::pthread_atfork([] { instance.mutex.lock(); }, [] { instance.mutex.unlock(); },
                                               [] { instance.mutex.unlock(); });
  (void)forkSafe;
  return instance;
}

// The slot and its fork handlers exist before any fork can matter (MadeAtLoad).
const detail::MadeAtLoad kSlotMadeAtLoad([] { (void)slot(); });

}  // namespace

void setDefaultLock(std::shared_ptr<ILock> lock) {
  if (!lock) throw ConfigError("dlock: setDefaultLock: the lock is null");
  auto& s = slot();
  std::lock_guard<std::mutex> guard(s.mutex);
  if (s.lock) throw ConfigError("dlock: setDefaultLock: a default lock is already set (set it once, at start-up)");
  s.lock = std::move(lock);
}

std::shared_ptr<ILock> defaultLock() {
  auto& s = slot();
  std::lock_guard<std::mutex> guard(s.mutex);
  if (!s.lock) {
    throw ConfigError(
        "dlock: no default lock: call dlock::setDefaultLock(...) at start-up before using DISTRIBUTED_LOCK");
  }
  return s.lock;
}

void resetDefaultLock() noexcept {
  auto& s = slot();
  std::lock_guard<std::mutex> guard(s.mutex);
  s.lock.reset();
}

}  // namespace dlock
