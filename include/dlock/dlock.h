// SPDX-License-Identifier: Apache-2.0
// dlock.h — all of dlock in one include: the lock and its builder, dlock::connect(uri), every
// backend's operator and options, the macros, the errors, leases, mutex handles and wait
// strategies. The headers below may also be included one by one.
#pragma once

// The interfaces and value types.
#include "dlock/Clock.h"
#include "dlock/IElectionOperator.h"
#include "dlock/IFenceRaiser.h"
#include "dlock/ILeaseInspector.h"
#include "dlock/ILock.h"
#include "dlock/IOperator.h"
#include "dlock/IOwnerRecorder.h"
#include "dlock/IRenewalBatch.h"
#include "dlock/IWait.h"
#include "dlock/Lease.h"
#include "dlock/LockError.h"
#include "dlock/LockOptions.h"
#include "dlock/LockStats.h"
#include "dlock/MutexHandle.h"
#include "dlock/Validation.h"
#include "dlock/async.h"

// The lock over any backend.
#include "dlock/core/Condition.h"
#include "dlock/core/DefaultLock.h"
#include "dlock/core/Election.h"
#include "dlock/core/ElectionMetrics.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/Metrics.h"
#include "dlock/core/ReadWriteLock.h"
#include "dlock/core/PermitLease.h"
#include "dlock/core/RequestIdHolder.h"
#include "dlock/core/Semaphore.h"
#include "dlock/core/SemaphoreBuilder.h"
#include "dlock/core/SharedWatchdog.h"
#include "dlock/core/Token.h"
#include "dlock/core/WaitStrategies.h"

// The backends, and the URI that picks one.
#include "dlock/cluster/ClusterKeys.h"
#include "dlock/cluster/ClusterOperator.h"
#include "dlock/common/Endpoint.h"
#include "dlock/common/RedisOptions.h"
#include "dlock/connect.h"
#include "dlock/duration.h"
#include "dlock/memory/MemoryOperator.h"
#include "dlock/memory/VirtualClock.h"
#include "dlock/redis/RedisOperator.h"
#include "dlock/redlock/RedlockOperator.h"
#include "dlock/sentinel/SentinelOperator.h"
#include "dlock/single/SingleOperator.h"
#include "dlock/uri.h"
#include "dlock/version.h"

// Every primitive by name over one backend.
#include "dlock/Client.h"

// Declarative locking (DLOCK_NO_SHORT_MACROS leaves out the DISTRIBUTED_… spellings).
#include "dlock/ScopedLock.h"
#include "dlock/macros.h"
