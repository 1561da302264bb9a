// SPDX-License-Identifier: Apache-2.0
// History.h — the operation records of a fault-testing run: Op (one record), HistoryWriter
// (appends a process's records to its file) and readHistory/readHistories (load them back).
//
// One file per process, one record per line, tab-separated, in this order:
//
//   process  kind  op  key  token  value  time_ns  error_type  message
//
//   process     "c3", "nemesis"
//   kind        invoke | ok | fail | info
//   op          acquire read write fenced-write release lost (the onLockLost notice), invalid
//               (the holder saw isHeld() turn false during its hold), hold-start (a long hold the
//               nemesis asked for; value = its longest ms), hang, fault-start fault-end (value =
//               the fault's name; key = the target process and message = the lock key it held,
//               for a fault aimed at a holder or waiter), fault-miss (value = why a cycle's fault
//               never struck), lease (LeaseRecorder.h: a confirmed acquisition or renewal, time_ns
//               = its send, value = its validity in ms, message = the owner token), held (value =
//               the time of the hold's last look that found the lease held; `invalid` carries it
//               too)
//   token       the fencing token, 0 when there is none
//   value       the counter value read or written, accepted | rejected, timeout, a fault's name
//   time_ns     CLOCK_MONOTONIC: comparable between the processes of one host
//   error_type  ConnectionError, LockLostError, ..., StoreError, untyped, unknown; empty when none
//
// Fields escape '\\' '\t' '\n' '\r' as \\ \t \n \r. Lines starting with '#' are comments (the
// file opens with "#dlock-history v1"). Each record is one write(2) of a whole line on an
// O_APPEND descriptor, so a process SIGKILLed at any moment leaves every record it completed;
// the reader drops a last line without its '\n' (a write cut short) and nothing else.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::nemesis {

enum class Kind { Invoke, Ok, Fail, Info };

[[nodiscard]] std::string_view kindName(Kind kind) noexcept;

struct Op {
  std::string process;
  Kind kind = Kind::Info;
  std::string op;
  std::string key;
  std::uint64_t token = 0;
  std::string value;
  std::int64_t timeNs = 0;
  std::string errorType;
  std::string message;
};

// CLOCK_MONOTONIC in nanoseconds.
[[nodiscard]] std::int64_t monotonicNs() noexcept;

// One line without its '\n', and back; parseLine throws std::runtime_error on a malformed line.
[[nodiscard]] std::string formatLine(const Op& op);
[[nodiscard]] Op parseLine(std::string_view line);

// Appends records to one file. Owner: the process that writes it. Thread safety: thread-safe
// (the client's onLockLost handler writes from the watchdog's thread).
class HistoryWriter {
 public:
  // Creates or appends to `path`; std::runtime_error when it cannot be opened.
  explicit HistoryWriter(const std::string& path);
  HistoryWriter(const HistoryWriter&) = delete;
  HistoryWriter& operator=(const HistoryWriter&) = delete;
  HistoryWriter(HistoryWriter&&) = delete;
  HistoryWriter& operator=(HistoryWriter&&) = delete;
  ~HistoryWriter();

  // Writes the record now, stamping timeNs with monotonicNs() when it is 0. Never throws: a
  // record that cannot be written is reported on stderr (the run's history is then short).
  void append(Op op) noexcept;

 private:
  void writeAll(const std::string& line) noexcept;

  int fd_ = -1;
  std::mutex mutex_;  // keeps the records of one file in time order
};

// The records of one file, in file order; a truncated last line is dropped. std::runtime_error
// when the file cannot be read or a complete line is malformed.
[[nodiscard]] std::vector<Op> readHistory(const std::string& path);

// The records of every *.history file in `directory`, each file's in its order, files by name.
[[nodiscard]] std::vector<Op> readHistories(const std::string& directory);

}  // namespace dlock::nemesis
