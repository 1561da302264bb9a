// SPDX-License-Identifier: Apache-2.0
// Fleet.h — the workload's client processes (dlock_nemesis_client), each with its own history
// file. The nemesis pauses (SIGSTOP/SIGCONT) and kills (SIGKILL) them; a killed client is
// replaced by a new one with a new id, so the workload keeps its size. stop() ends the live ones
// with SIGTERM and waits for them within a deadline: one still running then has hung. A client
// can be asked for a long hold of the first key (requestHold, through its --control file), so a
// fault finds it inside its section.
// Owner: the runner. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "Checker.h"
#include "History.h"

namespace dlock::nemesis {

struct ClientSettings {
  std::string executable;  // dlock_nemesis_client
  std::function<std::string(std::size_t slot)> lockUri;  // a replacement keeps its slot's
  std::string store;  // host:port
  std::vector<std::string> keys;
  std::chrono::milliseconds lease{1000};
  std::chrono::milliseconds acquireTimeout{1000};
  std::chrono::milliseconds hold{5};
  std::chrono::milliseconds hangBound{30000};
  std::string historyDirectory;
  std::uint64_t seed = 0;
  std::vector<std::string> extraArguments;
};

class Fleet {
 public:
  Fleet(ClientSettings settings, std::size_t size);
  Fleet(const Fleet&) = delete;
  Fleet& operator=(const Fleet&) = delete;
  ~Fleet();  // kills what still runs

  [[nodiscard]] std::size_t size() const { return live_.size(); }
  [[nodiscard]] std::string id(std::size_t slot) const { return live_.at(slot).id; }
  // Whether the client in `slot` is inside its critical section now, as its history's last
  // record says (acquired, not yet releasing).
  [[nodiscard]] bool insideSection(std::size_t slot) const;
  // Asks the client in `slot` to acquire the first key with a fixed `lease` (0: the watchdog's)
  // and hold it up to `max`, or until endHold(); `wait` (0: the client's) bounds its acquire;
  // `permits` (0: every permit) is what a semaphore client asks for; `resize` (0: none), the
  // capacity a semaphore client resizes to after it released the hold.
  void requestHold(std::size_t slot, std::chrono::milliseconds lease, std::chrono::milliseconds max,
                   std::chrono::milliseconds wait = std::chrono::milliseconds(0), std::uint32_t permits = 0,
                   std::uint32_t resize = 0);
  // When the client in `slot` was last asked for a hold (monotonic ns).
  [[nodiscard]] std::int64_t holdRequestedNs(std::size_t slot) const { return live_.at(slot).holdRequestedNs; }
  // Waits until that client is inside the requested hold; false when `budget` passed first (the
  // request is then withdrawn).
  [[nodiscard]] bool waitHolding(std::size_t slot, std::chrono::milliseconds budget);
  // Cancels the requested acquire the client in `slot` waits in (its CancelSource, Client.cpp) and
  // withdraws the request, so that it is not taken up again.
  void requestCancel(std::size_t slot);
  // Ends the requested hold (the client releases), or withdraws a request not yet taken.
  void endHold(std::size_t slot);
  // Every record of the run so far (all clients', live or not, and the nemesis's).
  [[nodiscard]] std::vector<Op> history() const;
  // Whether the client in `slot` is paused now.
  [[nodiscard]] bool paused(std::size_t slot) const { return live_.at(slot).paused; }
  [[nodiscard]] const std::string& firstKey() const { return settings_.keys.front(); }
  void pause(std::size_t slot);
  void resume(std::size_t slot);
  // SIGKILL, reap, and start a replacement in the same slot. A client that had already exited
  // is recorded as such (a crash), not as killed by the nemesis.
  void kill(std::size_t slot);
  // SIGTERM to every live client; waits until `deadline` for them to exit, then SIGKILLs the rest.
  std::vector<ClientExit> stop(std::chrono::steady_clock::time_point deadline);

 private:
  struct Client {
    std::string id;
    pid_t pid = -1;
    bool paused = false;
    std::int64_t holdRequestedNs = 0;
  };

  Client start(std::size_t slot);
  [[nodiscard]] std::string controlFile(std::size_t slot) const;

  ClientSettings settings_;
  std::vector<Client> live_;
  std::vector<ClientExit> ended_;
  std::uint64_t next_ = 0;
};

}  // namespace dlock::nemesis
