// SPDX-License-Identifier: Apache-2.0
// ElectionRecorder.h — the election clients' backend (dlock_nemesis_client --primitive elect): the
// lease evidence of LeaseRecorder.h under the election's fair lock, and the leader records
// (IElectionOperator) forwarded to the backend's. The evidence of the election's lock key
// ("election:NAME") is recorded under NAME, the key the nemesis and the checker know the
// election by, and each term's owner token is kept by its number (a Leadership does not show it).
// Owner: one client process. Thread safety: thread-safe, as the wrapped operator.
#pragma once

#include <dlock/IElectionOperator.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "LeaseRecorder.h"

namespace dlock::nemesis {

class ElectionRecorder final : public LeaseRecorder, public IElectionOperator {
 public:
  // ConfigError when `inner` keeps no leader records (Redlock).
  ElectionRecorder(std::shared_ptr<IOperator> inner, Sink sink);

  bool proclaim(std::string_view key, std::string_view token, std::uint64_t term, std::string_view value) override {
    return records_.proclaim(key, token, term, value);
  }
  LeaderRecord readLeader(std::string_view key) override { return records_.readLeader(key); }
  void announce(std::string_view key) override { records_.announce(key); }
  std::unique_ptr<ILeaderWatch> watchLeader(std::string_view key) override { return records_.watchLeader(key); }

  // The owner token of the hold numbered `term`, "" when no confirmed acquisition named it.
  [[nodiscard]] std::string ownerOf(std::uint64_t term) const;

 private:
  ElectionRecorder(std::shared_ptr<IOperator> inner, Sink sink, std::shared_ptr<std::map<std::uint64_t, std::string>> owners,
                   std::shared_ptr<std::mutex> mutex);

  IElectionOperator& records_;
  std::shared_ptr<std::map<std::uint64_t, std::string>> owners_;  // guarded by *mutex_
  std::shared_ptr<std::mutex> mutex_;
};

}  // namespace dlock::nemesis
