// SPDX-License-Identifier: Apache-2.0
// TlsTransport.h — TLS 1.2+ over a connected Socket (OpenSSL 3), for rediss:// servers.
//
// connect() builds the client context from TlsOptions (the CA files or the system trust store, a
// client certificate for mutual TLS), sets the name to verify (a DNS name, also sent as SNI, or an
// IP address) and runs the handshake within the connect deadline. Failures are ConnectionErrors
// naming the cause (Errors.h); a missing or unreadable certificate or key file is a ConfigError.
// A forked child never touches the parent's SSL state: its copy of the socket is closed
// (ForkSockets.h) and every call here then fails; the child's connections are new ones.
// Owner: one Connection. Thread safety: not thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "Socket.h"
#include "Transport.h"
#include "dlock/common/RedisOptions.h"

struct ssl_st;

namespace dlock::detail {

class TlsTransport final : public Transport {
 public:
  static std::unique_ptr<TlsTransport> connect(std::unique_ptr<Socket> socket, const ConnectionOptions& options,
                                               std::chrono::steady_clock::time_point deadline);

  TlsTransport(std::unique_ptr<Socket> socket, ssl_st* ssl, std::string address, std::string verifiedName,
               bool clientCertificate);
  ~TlsTransport() override;

  IoProgress read(char* buffer, std::size_t size) override;
  IoProgress write(const char* data, std::size_t size) override;
  [[nodiscard]] bool buffered() const noexcept override;
  [[nodiscard]] int fd() const noexcept override { return socket_->fd(); }

 private:
  // The progress of an SSL call that returned `result`, or the failure thrown ("<what> <address>").
  IoProgress progress(int result, const char* what);

  std::unique_ptr<Socket> socket_;
  struct SslDeleter {
    void operator()(ssl_st* ssl) const noexcept;
  };
  std::unique_ptr<ssl_st, SslDeleter> ssl_;  // after socket_: freed first
  const std::string address_;
  const std::string verifiedName_;
  const bool clientCertificate_;
  bool failed_ = false;  // a fatal TLS error: no close_notify on destruction
};

}  // namespace dlock::detail
