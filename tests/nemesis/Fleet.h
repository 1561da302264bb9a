// Fleet.h — the workload's client processes (dlock_nemesis_client), each with its own history
// file. The nemesis pauses (SIGSTOP/SIGCONT) and kills (SIGKILL) them; a killed client is
// replaced by a new one with a new id, so the workload keeps its size. stop() ends the live ones
// with SIGTERM and waits for them within a deadline: one still running then has hung.
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
  void pause(std::size_t slot);
  void resume(std::size_t slot);
  // SIGKILL, reap, and start a replacement in the same slot.
  void kill(std::size_t slot);
  // SIGTERM to every live client; waits until `deadline` for them to exit, then SIGKILLs the rest.
  std::vector<ClientExit> stop(std::chrono::steady_clock::time_point deadline);

 private:
  struct Client {
    std::string id;
    pid_t pid = -1;
    bool paused = false;
  };

  Client start(std::size_t slot);

  ClientSettings settings_;
  std::vector<Client> live_;
  std::vector<ClientExit> ended_;
  std::uint64_t next_ = 0;
};

}  // namespace dlock::nemesis
