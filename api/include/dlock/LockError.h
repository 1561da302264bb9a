// SPDX-License-Identifier: Apache-2.0
// LockError.h — every exception dlock throws. One root, LockError, on std::runtime_error:
// `catch (const dlock::LockError&)` catches all of dlock. None derives from a second standard
// exception, which would make std::exception an ambiguous base and slip past catch clauses.
//
//   ConnectionError       the backend is unreachable: I/O error, EOF, protocol error, timeout
//     LateCallError       the server refused a call that reached it after its caller stopped
//                         waiting (a paused server, a slow path): settled, nothing was done
//   BackendError          an error reply dlock cannot handle (WRONGTYPE, NOPERM, OOM, ...)
//   NotOwnerError         unlock/extend of a key the caller does not hold
//   LockLostError         the lease expired or was taken before unlock: the section ran unprotected
//   InvalidArgumentError  empty or oversized key, bad duration; thrown before anything is sent
//   ConfigError           bad URI or options; the message names the field
//   InterruptedError      a wait was cancelled (its CancelToken, or the lock's close()); nothing
//                         is held and no queue place is left behind
//   UpgradeError          a thread holding a read lock asked for the write lock of the same key
//
// Messages name the key and the backend address, never a password.
#pragma once

#include <stdexcept>

#include "dlock/Export.h"

namespace dlock {

class DLOCK_API LockError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class DLOCK_API ConnectionError : public LockError {
 public:
  using LockError::LockError;
};

// A ConnectionError whose outcome is known: the server ran nothing of the call.
class DLOCK_API LateCallError : public ConnectionError {
 public:
  using ConnectionError::ConnectionError;
};

class DLOCK_API BackendError : public LockError {
 public:
  using LockError::LockError;
};

class DLOCK_API NotOwnerError : public LockError {
 public:
  using LockError::LockError;
};

class DLOCK_API LockLostError : public LockError {
 public:
  using LockError::LockError;
};

class DLOCK_API InvalidArgumentError : public LockError {
 public:
  using LockError::LockError;
};

class DLOCK_API ConfigError : public LockError {
 public:
  using LockError::LockError;
};

class DLOCK_API InterruptedError : public LockError {
 public:
  using LockError::LockError;
};

// Thrown at once, never after a wait: the write would wait for this thread's own read hold
// (ReentrantReadWriteLock deadlocks there; ReadWriteLock::tryUpgrade is the way up).
class DLOCK_API UpgradeError : public LockError {
 public:
  using LockError::LockError;
};

}  // namespace dlock
