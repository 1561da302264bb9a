// SPDX-License-Identifier: Apache-2.0
#include "TlsTransport.h"

#include <arpa/inet.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "Errors.h"
#include "dlock/LockError.h"
#include "dlock/detail/Fork.h"
#include "dlock/detail/ForkGate.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {
namespace {

using Steady = std::chrono::steady_clock;

struct ContextDeleter {
  void operator()(SSL_CTX* context) const noexcept { SSL_CTX_free(context); }
};
using ContextPtr = std::unique_ptr<SSL_CTX, ContextDeleter>;

// OpenSSL is not fork-safe: its one-time initialisation, its process-wide locks (the one under
// which it registers a thread's first call, ex_data's, its caches') and the C library's time-zone
// lock (a certificate check calls gmtime) may be held at a fork by a thread the child does not
// have, and the child's own TLS set-up then waits for ever (seen in OPENSSL_init_crypto,
// ERR_set_mark and X509_STORE_new under SSL_CTX_new, and in __tz_convert under X509_verify_cert).
// So every call dlock makes into OpenSSL holds this gate (InsideOpenSsl): CPU only, on
// non-blocking sockets, the waits for the network outside it. Made after the log's gate (Log.h is
// included above), so fork() closes it first; nothing logs inside it.
struct TlsGate {
  static void beforeFork() {}
};
using TlsForkGate = ForkGate<TlsGate>;
const MadeAtLoad kTlsGateMadeAtLoad([] { (void)TlsForkGate::instance(); });

// A stretch of OpenSSL calls, inside the gate; never nested. A thread that made one also leaves
// OpenSSL inside the gate: OpenSSL's own exit handler (a thread-specific key's destructor) takes
// the registration lock, so it is run ahead of it, by a thread_local's destructor (those run first).
class InsideOpenSsl {
 public:
  InsideOpenSsl() { thread().called = true; }

 private:
  struct Thread {
    bool called = false;
    Thread() = default;
    Thread(const Thread&) = delete;
    Thread& operator=(const Thread&) = delete;
    ~Thread() {
      if (!called) return;
      const TlsForkGate::Shared gate;
      OPENSSL_thread_stop();
    }
  };
  static Thread& thread() {
    static thread_local Thread self;
    return self;
  }
  const TlsForkGate::Shared gate_;
};

// ConfigError unless `path` is a readable file; names the option and the path, never the contents.
void requireReadable(const char* option, const std::string& path, bool directory = false) {
  // access() and OpenSSL read the path up to a NUL: "/ca.pem\0x" would load "/ca.pem".
  if (path.find('\0') != std::string::npos) throw ConfigError(std::string("dlock: ") + option + " holds a NUL byte");
  if (::access(path.c_str(), R_OK | (directory ? X_OK : 0)) != 0) {
    const int error = errno;
    throw ConfigError(std::string("dlock: ") + option + " '" + path + "': cannot read it: " + std::strerror(error));
  }
}

[[noreturn]] void failToLoad(const char* option, const std::string& path, const char* what) {
  ERR_clear_error();  // the library's reasons may quote the file; say what was expected instead
  throw ConfigError(std::string("dlock: ") + option + " '" + path + "': " + what);
}

ContextPtr makeContext(const TlsOptions& tls) {
  ContextPtr context(SSL_CTX_new(TLS_client_method()));
  if (!context) throw std::bad_alloc();
  SSL_CTX_set_min_proto_version(context.get(), TLS1_2_VERSION);
  SSL_CTX_set_mode(context.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (!tls.caFile.empty()) requireReadable("tls_ca_file", tls.caFile);
  if (!tls.caDir.empty()) requireReadable("tls_ca_dir", tls.caDir, true);
  if (!tls.caFile.empty() || !tls.caDir.empty()) {
    if (SSL_CTX_load_verify_locations(context.get(), tls.caFile.empty() ? nullptr : tls.caFile.c_str(),
                                      tls.caDir.empty() ? nullptr : tls.caDir.c_str()) != 1) {
      failToLoad(tls.caFile.empty() ? "tls_ca_dir" : "tls_ca_file", tls.caFile.empty() ? tls.caDir : tls.caFile,
                 "holds no PEM certificate");
    }
  } else if (SSL_CTX_set_default_verify_paths(context.get()) != 1) {
    ERR_clear_error();
    throw ConfigError("dlock: TLS: the system's trust store cannot be loaded; give tls_ca_file");
  }
  if (tls.certFile.empty() != tls.keyFile.empty()) {
    throw ConfigError("dlock: TLS: tls_cert_file and tls_key_file go together (mutual TLS)");
  }
  if (!tls.certFile.empty()) {
    requireReadable("tls_cert_file", tls.certFile);
    requireReadable("tls_key_file", tls.keyFile);
    if (SSL_CTX_use_certificate_chain_file(context.get(), tls.certFile.c_str()) != 1) {
      failToLoad("tls_cert_file", tls.certFile, "holds no PEM certificate");
    }
    // Read apart from the certificate, so that "not a key" and "not this certificate's key" differ.
    std::unique_ptr<BIO, decltype(&BIO_free)> file(BIO_new_file(tls.keyFile.c_str(), "r"), BIO_free);
    std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
        file ? PEM_read_bio_PrivateKey(file.get(), nullptr, nullptr, nullptr) : nullptr, EVP_PKEY_free);
    if (!key) failToLoad("tls_key_file", tls.keyFile, "holds no unencrypted PEM private key");
    if (SSL_CTX_use_PrivateKey(context.get(), key.get()) != 1 || SSL_CTX_check_private_key(context.get()) != 1) {
      failToLoad("tls_key_file", tls.keyFile, "does not match tls_cert_file");
    }
  }
  SSL_CTX_set_verify(context.get(), tls.verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  return context;
}

bool isIpAddress(const std::string& name) {
  unsigned char address[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, name.c_str(), address) == 1 || ::inet_pton(AF_INET6, name.c_str(), address) == 1;
}

}  // namespace

void TlsTransport::SslDeleter::operator()(ssl_st* ssl) const noexcept { SSL_free(ssl); }

std::unique_ptr<TlsTransport> TlsTransport::connect(std::unique_ptr<Socket> socket, const ConnectionOptions& options,
                                                    Steady::time_point deadline) {
  const TlsOptions& tls = options.tls;
  const std::string address = options.address();
  const std::string name = tls.serverName.empty() ? options.host : tls.serverName;
  if (name.find('\0') != std::string::npos) throw ConfigError("dlock: TLS: the server name holds a NUL byte");
  if (!tls.verify) logger()->warn("dlock: TLS to {} without certificate verification (tls_verify=none)", address);
  std::unique_ptr<TlsTransport> transport;
  SSL* ssl = nullptr;
  {
    const InsideOpenSsl inside;
    ContextPtr context = makeContext(tls);
    ssl = SSL_new(context.get());  // holds its own reference to the context
    if (ssl == nullptr) throw std::bad_alloc();
    transport = std::make_unique<TlsTransport>(std::move(socket), ssl, address, name, !tls.certFile.empty());
    if (SSL_set_fd(ssl, transport->fd()) != 1) throw std::bad_alloc();
    if (tls.verify) {
      X509_VERIFY_PARAM* verify = SSL_get0_param(ssl);
      if (isIpAddress(name)) {
        if (X509_VERIFY_PARAM_set1_ip_asc(verify, name.c_str()) != 1) throw std::bad_alloc();
      } else {
        X509_VERIFY_PARAM_set_hostflags(verify, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        if (X509_VERIFY_PARAM_set1_host(verify, name.c_str(), name.size()) != 1) throw std::bad_alloc();
      }
    }
    // SNI takes a DNS name only (RFC 6066).
    if (!isIpAddress(name) && SSL_set_tlsext_host_name(ssl, name.c_str()) != 1) throw std::bad_alloc();
    SSL_set_connect_state(ssl);
  }
  const char* const what = "TLS handshake with";
  while (true) {
    const IoProgress step = [&] {  // one step inside the gate; the wait for the network outside
      const InsideOpenSsl inside;
      ERR_clear_error();
      const IoProgress made = transport->progress(SSL_do_handshake(ssl), what);
      if (made.closed) {
        TlsFailure closed;
        closed.closed = true;
        throwTlsError(closed, std::string(what) + " " + address);
      }
      return made;
    }();
    if (step.waitFor == 0) return transport;
    if (!waitReady(transport->fd(), step.waitFor, deadline, what, address)) {
      TlsFailure late;
      late.timedOut = true;
      throwTlsError(late, std::string(what) + " " + address);
    }
  }
}

TlsTransport::TlsTransport(std::unique_ptr<Socket> socket, ssl_st* ssl, std::string address, std::string verifiedName,
                           bool clientCertificate)
    : socket_(std::move(socket)),
      ssl_(ssl),
      address_(std::move(address)),
      verifiedName_(std::move(verifiedName)),
      clientCertificate_(clientCertificate) {}

TlsTransport::~TlsTransport() {
  const InsideOpenSsl inside;
  // A close_notify, best effort and without waiting; not in a forked child (fd -1).
  if (!failed_ && fd() >= 0 && SSL_is_init_finished(ssl_.get()) == 1) {
    (void)SSL_shutdown(ssl_.get());
  }
  ERR_clear_error();
  ssl_.reset();  // here, inside the gate (it frees the context too)
}

IoProgress TlsTransport::progress(int result, const char* what) {
  if (result > 0) return {static_cast<std::size_t>(result), 0, false};
  const int savedErrno = errno;
  switch (SSL_get_error(ssl_.get(), result)) {
    case SSL_ERROR_WANT_READ:
      return {0, POLLIN, false};
    case SSL_ERROR_WANT_WRITE:
      return {0, POLLOUT, false};
    case SSL_ERROR_ZERO_RETURN:
      failed_ = true;
      return {0, 0, true};
    default:
      break;
  }
  failed_ = true;
  const unsigned long error = ERR_peek_last_error();
  if (SSL_is_init_finished(ssl_.get()) == 1 && ERR_GET_LIB(error) == ERR_LIB_SSL &&
      ERR_GET_REASON(error) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
    ERR_clear_error();
    return {0, 0, true};  // a server that ends a connection without a close_notify
  }
  TlsFailure failure;
  failure.verifyResult = SSL_get_verify_result(ssl_.get());
  failure.error = error;
  failure.systemError = failure.error == 0 ? savedErrno : 0;
  failure.closed = failure.error == 0 && savedErrno == 0;
  failure.verifiedName = verifiedName_;
  failure.clientCertificate = clientCertificate_;
  ERR_clear_error();
  throwTlsError(failure, std::string(what) + " " + address_);
}

// SSL_has_pending reads this SSL's own buffers: no lock, so no gate.
bool TlsTransport::buffered() const noexcept { return fd() >= 0 && SSL_has_pending(ssl_.get()) == 1; }

IoProgress TlsTransport::read(char* buffer, std::size_t size) {
  if (fd() < 0) throwForkedError("reading from " + address_);
  const InsideOpenSsl inside;
  ERR_clear_error();
  errno = 0;
  const int got = SSL_read(ssl_.get(), buffer, static_cast<int>(std::min<std::size_t>(size, INT_MAX)));
  if (got > 0) return {static_cast<std::size_t>(got), 0, false};
  return progress(got, "reading from");
}

IoProgress TlsTransport::write(const char* data, std::size_t size) {
  if (fd() < 0) throwForkedError("writing to " + address_);
  const InsideOpenSsl inside;
  ERR_clear_error();
  errno = 0;
  const int sent = SSL_write(ssl_.get(), data, static_cast<int>(std::min<std::size_t>(size, INT_MAX)));
  if (sent > 0) return {static_cast<std::size_t>(sent), 0, false};
  if (SSL_get_error(ssl_.get(), sent) == SSL_ERROR_SYSCALL) {
    // The server may have said why before it closed (TLS 1.3 refuses a client certificate after
    // the handshake, in an alert): read it, it names the cause better than the reset does.
    const int savedErrno = errno;
    char byte = 0;
    const int got = SSL_read(ssl_.get(), &byte, 1);
    if (got <= 0 && SSL_get_error(ssl_.get(), got) == SSL_ERROR_SSL) return progress(got, "writing to");
    ERR_clear_error();
    errno = savedErrno;
    failed_ = true;
    throwSystemError(savedErrno != 0 ? savedErrno : EPIPE, "writing to " + address_);
  }
  return progress(sent, "writing to");
}

}  // namespace dlock::detail
