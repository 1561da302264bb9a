// SPDX-License-Identifier: Apache-2.0
#include "PlainTransport.h"

#include <sys/socket.h>

#include <cerrno>

#include "Errors.h"

namespace dlock::detail {

PlainTransport::PlainTransport(std::unique_ptr<Socket> socket, std::string address)
    : socket_(std::move(socket)), address_(std::move(address)) {}

IoProgress PlainTransport::read(char* buffer, std::size_t size) {
  while (true) {
    if (fd() < 0) throwForkedError("reading from " + address_);
    const ssize_t got = ::recv(fd(), buffer, size, 0);
    if (got > 0) return {static_cast<std::size_t>(got), 0, false};
    if (got == 0) return {0, 0, true};
    if (errno == EAGAIN || errno == EWOULDBLOCK) return {0, POLLIN, false};
    if (errno == ECONNRESET) return {0, 0, true};  // as a close: a TLS port resets a plain client
    if (errno != EINTR) throwSystemError(errno, "reading from " + address_);
  }
}

IoProgress PlainTransport::write(const char* data, std::size_t size) {
  while (true) {
    if (fd() < 0) throwForkedError("writing to " + address_);
    const ssize_t sent = ::send(fd(), data, size, MSG_NOSIGNAL);
    if (sent >= 0) return {static_cast<std::size_t>(sent), sent == 0 ? short{POLLOUT} : short{0}, false};
    if (errno == EAGAIN || errno == EWOULDBLOCK) return {0, POLLOUT, false};
    if (errno != EINTR) throwSystemError(errno, "writing to " + address_);
  }
}

}  // namespace dlock::detail
