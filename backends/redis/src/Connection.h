// SPDX-License-Identifier: Apache-2.0
// Connection.h — one connection to one Redis server: connect timeout, command timeout, TCP
// keep-alive, TLS, AUTH (password or ACL user + password), SELECT db, and the server's clock
// (TIME), against which the scripts that change a hold are bound (refuseAfter, Scripts.h).
//
// dlock opens the socket (Socket.h) and runs the bytes through a Transport (plain, or TLS);
// hiredis only formats commands (redisFormatCommandArgv) and parses replies (redisReader).
// Commands go as binary-safe argv, never through a format string. An I/O error, EOF, protocol
// error or timeout throws ConnectionError and marks the connection broken(): it is not reused
// after an error. Error *replies* are returned to the caller, who knows which ones it can handle
// (NOSCRIPT, MOVED, ...). Every wait (connect, reply) is cut to the budget of the wait the call runs
// inside (CallBudget.h).
// Owner: one pool slot or one subscriber. Thread safety: not thread-safe.
#pragma once

#include <hiredis/hiredis.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "Reply.h"
#include "Transport.h"
#include "dlock/common/RedisOptions.h"

namespace dlock::detail {

using Argv = std::vector<std::string_view>;

class Connection {
 public:
  // Connects (and, over TLS, completes the handshake) within connectTimeout, then sends AUTH,
  // SELECT and TIME in one round trip, so a connection exists only once the server has answered.
  // ConnectionError when unreachable or the TLS handshake fails; ConfigError for an unreadable
  // certificate or key file; BackendError when AUTH, SELECT or TIME is refused.
  explicit Connection(const ConnectionOptions& options);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  // Sends one command and waits for its reply (at most commandTimeout).
  ReplyPtr command(const Argv& argv);

  // Pipelining: queue commands, then read their replies in order. Nothing is written until
  // the first readReply().
  void append(const Argv& argv);
  ReplyPtr readReply();

  // Changes the reply timeout (the subscriber waits longer than a command does).
  void setReadTimeout(std::chrono::milliseconds timeout);

  [[nodiscard]] bool broken() const noexcept { return broken_; }
  // True when the failure that broke it was a reply timeout.
  [[nodiscard]] bool timedOut() const noexcept { return timedOut_; }
  [[nodiscard]] const std::string& address() const noexcept { return address_; }
  // The instant, in the server's clock (ms since the epoch, as text), after which a command
  // appended now is no longer waited for: this call's reply timeout (cut to its CallBudget) from
  // now, moved into the server's clock by the last TIME sample's lower bound (the server's time
  // when it answered, less the local instant the answer arrived: never ahead of the server), less
  // an allowance for the two clocks' drift since (1 ms, and 500 ppm of the sample's age: NTP's slew
  // limit). So the server passes it no later than the local wait ends, and refuses a bound script
  // that arrives after.
  [[nodiscard]] std::string refuseAfter() const;
  // The sample is renewed once older than this, by a TIME sent ahead of the next bound script
  // (no round trip of its own): a backward step of the server's clock is taken in within it.
  static constexpr std::chrono::seconds kClockSampleAge{1};
  // Appends TIME when the sample is older than kClockSampleAge; true when it did, and the caller
  // then reads its reply with readClockSample() before the replies appended after it.
  bool appendClockSampleIfStale();
  void readClockSample();
  // A TIME round trip now (nothing may be appended): after a refusal that came while the call was
  // still waited for, which only a step of the server's clock explains.
  void sampleClockNow();

  // Non-blocking use by the subscriber: the socket, and the buffered-I/O steps of readReply
  // taken apart. Each throws ConnectionError (and breaks the connection) on failure.
  [[nodiscard]] int fd() const noexcept { return transport_->fd(); }
  void flushWrites();                  // writes everything appended so far (within the read timeout)
  void readAvailable();                // reads what the socket has (call when poll says readable)
  ReplyPtr takeBufferedReply();        // a complete reply already read, or nullptr

 private:
  using Deadline = std::chrono::steady_clock::time_point;
  void handshake(const ConnectionOptions& options);
  // Takes the server's clock from a TIME reply read just now; BackendError for a refusal.
  void sampleServerClock(const redisReply& reply);
  // Runs one I/O step; a failure breaks the connection.
  template <class Step>
  auto guarded(Step&& step) -> decltype(step());
  // Writes what was appended; true when there was something to write.
  bool flushUntil(Deadline deadline);
  // Reads once into the reader, waiting for the socket until `deadline`; false when it would block.
  // `justAsked`: a request just went out, so its reply cannot be there yet: wait in the read where
  // the transport can (Transport::readWithin), else poll, then read — never read to find nothing.
  bool readOnce(Deadline deadline, bool wait, bool justAsked = false);
  void waitFor(short events, Deadline deadline, const char* what);

  struct ReaderDeleter {
    void operator()(redisReader* reader) const noexcept { redisReaderFree(reader); }
  };
  std::string address_;
  // The last TIME sample: the server's clock less the steady clock, in µs (a lower bound), and
  // when it was taken.
  std::int64_t serverAheadUs_ = 0;
  Deadline sampledAt_{};
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<redisReader, ReaderDeleter> reader_;
  std::string output_;      // formatted commands not yet written
  std::size_t written_ = 0;  // of output_
  std::chrono::milliseconds readTimeout_;
  int firstByte_ = -1;  // the first byte received, for the protocol-error hint
  bool maybeTlsPort_ = false;  // in the handshake of a plain TCP connection: a close may mean a TLS port
  bool broken_ = false;
  bool timedOut_ = false;
};

}  // namespace dlock::detail
