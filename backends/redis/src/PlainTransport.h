// SPDX-License-Identifier: Apache-2.0
// PlainTransport.h — bytes as they are, over TCP or a Unix socket. The socket is left blocking
// after its connect, and every call but readWithin() passes MSG_DONTWAIT: read() and write() never
// wait, and readWithin() waits in the receive itself, bounded by SO_RCVTIMEO.
// Owner: one Connection. Thread safety: not thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "Socket.h"
#include "Transport.h"

namespace dlock::detail {

class PlainTransport final : public Transport {
 public:
  PlainTransport(std::unique_ptr<Socket> socket, std::string address);

  IoProgress read(char* buffer, std::size_t size) override;
  IoProgress write(const char* data, std::size_t size) override;
  IoProgress readWithin(char* buffer, std::size_t size, std::chrono::milliseconds timeout) override;
  [[nodiscard]] bool buffered() const noexcept override { return false; }
  [[nodiscard]] int fd() const noexcept override { return socket_->fd(); }

 private:
  std::unique_ptr<Socket> socket_;
  const std::string address_;
  std::chrono::milliseconds receiveTimeout_{0};  // SO_RCVTIMEO as last set; 0: none yet
};

}  // namespace dlock::detail
