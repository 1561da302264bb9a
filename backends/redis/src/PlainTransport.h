// SPDX-License-Identifier: Apache-2.0
// PlainTransport.h — bytes as they are, over TCP or a Unix socket.
// Owner: one Connection. Thread safety: not thread-safe.
#pragma once

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
  [[nodiscard]] bool buffered() const noexcept override { return false; }
  [[nodiscard]] int fd() const noexcept override { return socket_->fd(); }

 private:
  std::unique_ptr<Socket> socket_;
  const std::string address_;
};

}  // namespace dlock::detail
