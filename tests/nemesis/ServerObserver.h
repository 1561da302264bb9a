// SPDX-License-Identifier: Apache-2.0
// ServerObserver.h — the server's own record of the lock keys, for the checker to set beside the
// clients' histories: a fault-free link straight to each lock server (not through a proxy) runs
// MONITOR, and every command on a lock key of the workload, the ones dlock's scripts run included
// (`[0 lua]`), becomes a record of process `server` in observer.history:
//
//   server-set    key = the user key, value = the owner token written, token = its PX (ms)
//   server-del    key = the user key (the release's DEL)
//   server-watch  message = the server's address: from here on its stream is seen (a connection,
//                 or the end of lines whose time could not be placed); what ran before is unseen
//   server-expire key = the user key, value = the new TTL in ms (an extend's PEXPIRE)
//   (those three: message = `<node> <lag> | <caller>`, the server's address, how many ns the
//   command came after its caller, and the caller's arguments: the script call (EVALSHA sha n
//   keys... args...) for a command a script ran, the command itself otherwise. A script's clock
//   starts between its call and its first command: a lease set or extended by it started no
//   earlier than time_ns - lag, and a key it found expired had expired by time_ns)
//   server-enqueue, server-leave, server-unqueue   the fair lock's queue (FairOrder.h): RPUSH and
//                LREM of the queue, ZREM of the waiter leases; value = the waiter's token
//   server-tombstone  value = a token whose attempt gave up: the `SET <release record> 0` a fair
//                leave (or a cancel) writes first, shown whether or not its NX let it write
//
// time_ns is the server's own timestamp of the command (MONITOR's microseconds of wall clock),
// mapped to CLOCK_MONOTONIC on this host: the observer reads the stream tens of ms behind, so its
// own reading time would misorder commands. A line whose timestamp lies in the future or far in
// the past (a server whose clock was moved: the clock-jump scenario) is dropped. A server that
// dies is reconnected to, and what it ran meanwhile is not seen: the record is evidence where it
// exists, never proof of absence.
//
// Every data node is watched. A replica's commands from its master's link (a replication stream,
// scripts replayed as their effects) are not recorded: only what a server ran as a master is.
// Where there are several servers, only the commands scripts ran count (dlock writes its keys
// only from scripts); on one server, plain commands too, but not from another observed server. The checker uses a SET for another owner as a loss only
// where a key lives on one server: on Redlock a node outside the holder's quorum may rightly
// carry another owner's token for a while.
// One thread per server. Owner: the runner. Thread safety: not thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "History.h"

namespace dlock::nemesis {

struct MonitorLine {
  std::int64_t wallUs = 0;  // the server's timestamp
  std::vector<std::string> args;
  bool fromScript = false;  // run by a script ("[0 lua]")
  std::string client;       // "127.0.0.1:41234", "lua"
};

// One MONITOR line: its timestamp and its command's arguments, unquoted; nothing for a line that
// is not a command.
[[nodiscard]] std::optional<MonitorLine> parseMonitorLine(const std::string& line);

class ServerObserver {
 public:
  // Watches `addresses` (host:port) for the lock keys of `keys` under `prefix`, on one server or
  // a cluster; records to `historyPath`.
  ServerObserver(std::vector<std::string> addresses, const std::vector<std::string>& keys, const std::string& prefix,
                 const std::string& historyPath);
  ServerObserver(const ServerObserver&) = delete;
  ServerObserver& operator=(const ServerObserver&) = delete;
  ~ServerObserver();  // stops and joins

  // Lines read from every server so far.
  [[nodiscard]] long long lines() const { return lines_; }

 private:
  void watch(const std::string& address);
  // The state of one server's stream: the last command of a client (a script's commands follow
  // it), whether a server-watch marker is due, whether the server's stamps could be placed.
  struct Stream {
    MonitorLine caller;
    bool gap = true;
    bool serverTimed = true;
  };
  void record(const std::string& address, const MonitorLine& line, Stream& stream);
  // A fair-queue command on a workload key, recorded from `record` (time and message set);
  // false when it is none.
  bool recordQueue(const std::string& name, const std::vector<std::string>& command, Op record);
  bool recordTombstone(const std::string& name, const std::vector<std::string>& command, Op record);

  std::vector<std::pair<std::string, std::string>> names_;  // (redis lock key, user key)
  // The fair lock's queue and waiter-lease keys: (redis key, user key).
  std::vector<std::pair<std::string, std::string>> queues_;
  std::vector<std::pair<std::string, std::string>> leases_;
  // A token's release record, split where the token goes: (before, after, user key).
  struct RecordName {
    std::string before, after, key;
  };
  std::vector<RecordName> records_;
  HistoryWriter writer_;
  std::atomic<bool> stopping_{false};
  std::atomic<long long> lines_{0};
  std::vector<std::string> addresses_;  // every observed server: a replica's link to its master
  std::vector<std::thread> threads_;
};

}  // namespace dlock::nemesis
