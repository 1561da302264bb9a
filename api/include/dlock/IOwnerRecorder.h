// SPDX-License-Identifier: Apache-2.0
// IOwnerRecorder.h — a backend that records who holds a lease (an owner label) with the
// acquisition that takes it, for diagnostics: ILeaseInspector::inspect and `dlock status` show
// it. The label lives exactly as long as its lease (renewed by extend, removed by the release,
// expiring with the lease), and the release still compares only the token. Every backend of this
// library offers it; the lock uses it only when asked (LockBuilder::ownerLabel).
// Thread safety: implementations are thread-safe.
#pragma once

#include <chrono>
#include <string_view>

#include "dlock/IOperator.h"

namespace dlock {

class IOwnerRecorder {
 public:
  IOwnerRecorder() = default;
  IOwnerRecorder(const IOwnerRecorder&) = delete;
  IOwnerRecorder& operator=(const IOwnerRecorder&) = delete;
  virtual ~IOwnerRecorder() = default;

  // IOperator::lock that, when it takes the key, also records `label` (any bytes, at most
  // kMaxOwnerLabelBytes: InvalidArgumentError beyond) and the backend's time. A retry by the
  // token that holds the key keeps what its first try recorded.
  virtual AcquireResult lockRecordingOwner(std::string_view key, std::string_view token,
                                           std::chrono::milliseconds ttl, std::string_view label) = 0;
};

}  // namespace dlock
