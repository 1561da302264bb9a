// SPDX-License-Identifier: Apache-2.0
// macros.h — declarative locking for a scope.
//
//   DISTRIBUTED_LOCK(key);                      blocks until `key` of the default lock is held;
//                                               released when the scope ends, exceptions included
//   DISTRIBUTED_LOCK_WITH(lock, key);           the same on an injected ILock (reference or shared_ptr)
//   DISTRIBUTED_TRY_LOCK(key, timeout) { ... } else { ... }
//                                               runs the block only when the key was had in time
//                                               (a timeout <= 0 tries once)
//   DISTRIBUTED_TRY_LOCK_WITH(lock, key, timeout) { ... } else { ... }
//   DISTRIBUTED_LOCK_NAMED(guard, key);         DISTRIBUTED_LOCK with a guard named `guard`, a
//                                               dlock::ScopedLock whose unlock() reports
//   DISTRIBUTED_TRY_LOCK_NAMED(guard, key, timeout) { ... } else { ... }
//   DISTRIBUTED_READ_LOCK_WITH(rw, key);        the read lock of a dlock::ReadWriteLock (reference or
//   DISTRIBUTED_WRITE_LOCK_WITH(rw, key);       shared_ptr), or its write lock, for the scope
//   DISTRIBUTED_TRY_READ_LOCK_WITH(rw, key, timeout) { ... } else { ... }
//   DISTRIBUTED_TRY_WRITE_LOCK_WITH(rw, key, timeout) { ... } else { ... }
//
// A guard's destructor never throws, so a scope that just ends cannot say that its lease was
// lost on the way (a long pause, a network partition). Code that must know has three ways:
//   - end the section with the named guard's unlock(): LockLostError when the lease had ended;
//   - check isHeld(key) before committing its result (local, no round trip), and register an
//     onLockLost handler for leases the watchdog finds gone;
//   - pass fencingToken() (guard.fencingToken()) to the storage it writes, which refuses a token
//     lower than one it has seen: the only check that also holds after a pause.
// With an injected lock, name a guard without a macro: `dlock::ScopedLock guard(lock, key);`.
//
// The default lock is set once at start-up with dlock::setDefaultLock(); using a macro without
// one throws dlock::ConfigError. `key` is evaluated once. Unnamed guards get unique names
// (__COUNTER__), so several macros may share a scope. The DLOCK_-prefixed names are always
// defined; define DLOCK_NO_SHORT_MACROS to leave out the short ones.
#pragma once

#include "dlock/ScopedLock.h"
#include "dlock/core/DefaultLock.h"
#include "dlock/core/ReadWriteLock.h"

#define DLOCK_DETAIL_CONCAT_INNER(a, b) a##b
#define DLOCK_DETAIL_CONCAT(a, b) DLOCK_DETAIL_CONCAT_INNER(a, b)
#define DLOCK_DETAIL_GUARD DLOCK_DETAIL_CONCAT(dlockScopedLock_, __COUNTER__)

#define DLOCK_DISTRIBUTED_LOCK(key) const ::dlock::ScopedLock DLOCK_DETAIL_GUARD(::dlock::defaultLock(), (key))

#define DLOCK_DISTRIBUTED_LOCK_WITH(lock, key) const ::dlock::ScopedLock DLOCK_DETAIL_GUARD((lock), (key))

#define DLOCK_DISTRIBUTED_LOCK_NAMED(guard, key) ::dlock::ScopedLock guard(::dlock::defaultLock(), (key))

#define DLOCK_DETAIL_TRY_LOCK(guard, lock, key, timeout) \
  if (::dlock::ScopedLock guard((lock), (key), (timeout)); guard.owns())

#define DLOCK_DISTRIBUTED_TRY_LOCK(key, timeout) \
  DLOCK_DETAIL_TRY_LOCK(DLOCK_DETAIL_GUARD, ::dlock::defaultLock(), key, timeout)

#define DLOCK_DISTRIBUTED_TRY_LOCK_WITH(lock, key, timeout) \
  DLOCK_DETAIL_TRY_LOCK(DLOCK_DETAIL_GUARD, lock, key, timeout)

#define DLOCK_DISTRIBUTED_TRY_LOCK_NAMED(guard, key, timeout) \
  DLOCK_DETAIL_TRY_LOCK(guard, ::dlock::defaultLock(), key, timeout)

#define DLOCK_DISTRIBUTED_READ_LOCK_WITH(rw, key) \
  const ::dlock::ScopedLock DLOCK_DETAIL_GUARD(::dlock::detail::readWriteOf(rw).readLock(), (key))

#define DLOCK_DISTRIBUTED_WRITE_LOCK_WITH(rw, key) \
  const ::dlock::ScopedLock DLOCK_DETAIL_GUARD(::dlock::detail::readWriteOf(rw).writeLock(), (key))

#define DLOCK_DISTRIBUTED_TRY_READ_LOCK_WITH(rw, key, timeout) \
  DLOCK_DETAIL_TRY_LOCK(DLOCK_DETAIL_GUARD, ::dlock::detail::readWriteOf(rw).readLock(), key, timeout)

#define DLOCK_DISTRIBUTED_TRY_WRITE_LOCK_WITH(rw, key, timeout) \
  DLOCK_DETAIL_TRY_LOCK(DLOCK_DETAIL_GUARD, ::dlock::detail::readWriteOf(rw).writeLock(), key, timeout)

#ifndef DLOCK_NO_SHORT_MACROS
#define DISTRIBUTED_LOCK(key) DLOCK_DISTRIBUTED_LOCK(key)
#define DISTRIBUTED_LOCK_WITH(lock, key) DLOCK_DISTRIBUTED_LOCK_WITH(lock, key)
#define DISTRIBUTED_TRY_LOCK(key, timeout) DLOCK_DISTRIBUTED_TRY_LOCK(key, timeout)
#define DISTRIBUTED_TRY_LOCK_WITH(lock, key, timeout) DLOCK_DISTRIBUTED_TRY_LOCK_WITH(lock, key, timeout)
#define DISTRIBUTED_LOCK_NAMED(guard, key) DLOCK_DISTRIBUTED_LOCK_NAMED(guard, key)
#define DISTRIBUTED_TRY_LOCK_NAMED(guard, key, timeout) DLOCK_DISTRIBUTED_TRY_LOCK_NAMED(guard, key, timeout)
#define DISTRIBUTED_READ_LOCK_WITH(rw, key) DLOCK_DISTRIBUTED_READ_LOCK_WITH(rw, key)
#define DISTRIBUTED_WRITE_LOCK_WITH(rw, key) DLOCK_DISTRIBUTED_WRITE_LOCK_WITH(rw, key)
#define DISTRIBUTED_TRY_READ_LOCK_WITH(rw, key, timeout) DLOCK_DISTRIBUTED_TRY_READ_LOCK_WITH(rw, key, timeout)
#define DISTRIBUTED_TRY_WRITE_LOCK_WITH(rw, key, timeout) DLOCK_DISTRIBUTED_TRY_WRITE_LOCK_WITH(rw, key, timeout)
#endif
