// SPDX-License-Identifier: Apache-2.0
// Transport.h — the byte stream under a Connection: TCP or a Unix socket (PlainTransport), or TLS
// over either (TlsTransport). Non-blocking: a call that cannot progress says which readiness of
// fd() to wait for, so one poll() loop serves every transport (and an event loop could later).
// I/O failures throw ConnectionError through Errors.h; the transport must then be discarded.
// Owner: one Connection. Thread safety: not thread-safe.
#pragma once

#include <poll.h>

#include <chrono>
#include <cstddef>

namespace dlock::detail {

// What one read or write did: `bytes` moved, or none and the poll() events to wait for, or the
// server closed the stream.
struct IoProgress {
  std::size_t bytes = 0;
  short waitFor = 0;  // POLLIN or POLLOUT when nothing moved
  bool closed = false;
};

class Transport {
 public:
  Transport() = default;
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;
  virtual ~Transport() = default;

  // Reads up to `size` bytes.
  virtual IoProgress read(char* buffer, std::size_t size) = 0;
  // Writes up to `size` bytes of `data`.
  virtual IoProgress write(const char* data, std::size_t size) = 0;
  // Waits up to `timeout` for bytes and reads them in one system call where the transport can (a
  // receive bounded by SO_RCVTIMEO), where poll() then read() take two: a reply just asked for
  // costs one call fewer. Nothing read ({0, POLLIN}): the time ran out, a signal came, or the
  // transport cannot; the caller then polls up to its deadline.
  virtual IoProgress readWithin(char* /*buffer*/, std::size_t /*size*/, std::chrono::milliseconds /*timeout*/) {
    return {0, POLLIN, false};
  }
  // Bytes read from the socket but not yet returned by read() (TLS decrypts whole records): poll()
  // on fd() does not see them.
  [[nodiscard]] virtual bool buffered() const noexcept = 0;
  // The socket to poll; -1 in a forked child (ForkSockets.h), where every call fails.
  [[nodiscard]] virtual int fd() const noexcept = 0;
};

}  // namespace dlock::detail
