// SPDX-License-Identifier: Apache-2.0
#include "PlainTransport.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>

#include "Errors.h"

namespace dlock::detail {

PlainTransport::PlainTransport(std::unique_ptr<Socket> socket, std::string address)
    : socket_(std::move(socket)), address_(std::move(address)) {
  const int flags = ::fcntl(fd(), F_GETFL);
  if (flags < 0 || ::fcntl(fd(), F_SETFL, flags & ~O_NONBLOCK) < 0) throwSystemError(errno, "setting up " + address_);
}

IoProgress PlainTransport::read(char* buffer, std::size_t size) {
  while (true) {
    if (fd() < 0) throwForkedError("reading from " + address_);
    const ssize_t got = ::recv(fd(), buffer, size, MSG_DONTWAIT);
    if (got > 0) return {static_cast<std::size_t>(got), 0, false};
    if (got == 0) return {0, 0, true};
    if (errno == EAGAIN || errno == EWOULDBLOCK) return {0, POLLIN, false};
    if (errno == ECONNRESET) return {0, 0, true};  // as a close: a TLS port resets a plain client
    if (errno != EINTR) throwSystemError(errno, "reading from " + address_);
  }
}

IoProgress PlainTransport::readWithin(char* buffer, std::size_t size, std::chrono::milliseconds timeout) {
  if (fd() < 0) throwForkedError("reading from " + address_);
  if (timeout.count() <= 0) return {0, POLLIN, false};
  if (timeout != receiveTimeout_) {
    const timeval limit{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
    if (::setsockopt(fd(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit) != 0) return {0, POLLIN, false};
    receiveTimeout_ = timeout;
  }
  const ssize_t got = ::recv(fd(), buffer, size, 0);
  if (got > 0) return {static_cast<std::size_t>(got), 0, false};
  if (got == 0) return {0, 0, true};
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return {0, POLLIN, false};
  if (errno == ECONNRESET) return {0, 0, true};
  throwSystemError(errno, "reading from " + address_);
}

IoProgress PlainTransport::write(const char* data, std::size_t size) {
  while (true) {
    if (fd() < 0) throwForkedError("writing to " + address_);
    const ssize_t sent = ::send(fd(), data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent >= 0) return {static_cast<std::size_t>(sent), sent == 0 ? short{POLLOUT} : short{0}, false};
    if (errno == EAGAIN || errno == EWOULDBLOCK) return {0, POLLOUT, false};
    if (errno != EINTR) throwSystemError(errno, "writing to " + address_);
  }
}

}  // namespace dlock::detail
