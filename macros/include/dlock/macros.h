// macros.h — declarative locking for a scope.
//
//   DISTRIBUTED_LOCK(key);                      blocks until `key` of the default lock is held;
//                                               released when the scope ends, exceptions included
//   DISTRIBUTED_LOCK_WITH(lock, key);           the same on an injected ILock (reference or shared_ptr)
//   DISTRIBUTED_TRY_LOCK(key, timeout) { ... } else { ... }
//                                               runs the block only when the key was had in time
//   DISTRIBUTED_TRY_LOCK_WITH(lock, key, timeout) { ... } else { ... }
//
// The default lock is set once at start-up with dlock::setDefaultLock(); using a macro without
// one throws dlock::ConfigError. `key` is evaluated once. Guards get unique names (__COUNTER__),
// so several macros may share a scope. The DLOCK_-prefixed names are always defined; define
// DLOCK_NO_SHORT_MACROS to leave out the short ones.
#pragma once

#include "dlock/ScopedLock.h"
#include "dlock/core/DefaultLock.h"

#define DLOCK_DETAIL_CONCAT_INNER(a, b) a##b
#define DLOCK_DETAIL_CONCAT(a, b) DLOCK_DETAIL_CONCAT_INNER(a, b)
#define DLOCK_DETAIL_GUARD DLOCK_DETAIL_CONCAT(dlockScopedLock_, __COUNTER__)

#define DLOCK_DISTRIBUTED_LOCK(key) const ::dlock::ScopedLock DLOCK_DETAIL_GUARD(::dlock::defaultLock(), (key))

#define DLOCK_DISTRIBUTED_LOCK_WITH(lock, key) const ::dlock::ScopedLock DLOCK_DETAIL_GUARD((lock), (key))

#define DLOCK_DETAIL_TRY_LOCK(guard, lock, key, timeout) \
  if (const ::dlock::ScopedLock guard((lock), (key), (timeout)); guard.owns())

#define DLOCK_DISTRIBUTED_TRY_LOCK(key, timeout) \
  DLOCK_DETAIL_TRY_LOCK(DLOCK_DETAIL_GUARD, ::dlock::defaultLock(), key, timeout)

#define DLOCK_DISTRIBUTED_TRY_LOCK_WITH(lock, key, timeout) \
  DLOCK_DETAIL_TRY_LOCK(DLOCK_DETAIL_GUARD, lock, key, timeout)

#ifndef DLOCK_NO_SHORT_MACROS
#define DISTRIBUTED_LOCK(key) DLOCK_DISTRIBUTED_LOCK(key)
#define DISTRIBUTED_LOCK_WITH(lock, key) DLOCK_DISTRIBUTED_LOCK_WITH(lock, key)
#define DISTRIBUTED_TRY_LOCK(key, timeout) DLOCK_DISTRIBUTED_TRY_LOCK(key, timeout)
#define DISTRIBUTED_TRY_LOCK_WITH(lock, key, timeout) DLOCK_DISTRIBUTED_TRY_LOCK_WITH(lock, key, timeout)
#endif
