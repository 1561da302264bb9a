// SPDX-License-Identifier: Apache-2.0
// TLS (rediss://) and Unix-socket (unix://) connections to real servers: mutual exclusion across
// processes, each connect failure named within the connect timeout, mutual TLS, fork().
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "ProcessIncrements.h"
#include "ForkedIncrements.h"
#include "LogCapture.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "TlsCertificates.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/single/SingleOperator.h"

using namespace std::chrono_literals;
using dlock::test::LogCapture;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;
using dlock::test::TlsCertificates;
using Steady = std::chrono::steady_clock;

namespace {

constexpr auto kConnectTimeout = 2s;

RedisProcess::Options tlsServer(const TlsCertificates::Pair& certificate, const TlsCertificates& certificates,
                                bool authClients = false) {
  RedisProcess::Options options;
  options.tls = RedisProcess::Tls{certificate.cert, certificate.key, certificates.caFile(), authClients};
  return options;
}

// rediss://127.0.0.1:<TLS port>?connect_timeout=2s&tls_ca_file=<the test CA>[&extra]
std::string tlsUri(const RedisProcess& server, const TlsCertificates& certificates, const std::string& extra = "",
                   const std::string& host = "127.0.0.1") {
  return "rediss://" + host + ":" + std::to_string(server.tlsPort()) + "?connect_timeout=2s&tls_ca_file=" +
         certificates.caFile() + (extra.empty() ? "" : "&" + extra);
}

// Runs one acquisition through `uri`; returns the error's message, checking it is a `Error` and
// that it came within `budget`: the connect timeout (the one budget a connect has, TLS handshake
// included), unless the failure is that timeout.
template <class Error>
std::string failureOf(const std::string& uri, std::chrono::milliseconds budget = kConnectTimeout) {
  const auto started = Steady::now();
  std::string message;
  try {
    auto lock = dlock::LockBuilder().backend(dlock::connect(uri)).leaseTime(10s).build();
    (void)lock->tryLock("tls-failure");
    FAIL("no error from " << uri);
  } catch (const Error& error) {
    message = error.what();
  } catch (const std::exception& error) {
    FAIL("an error of another type: " << error.what());
  }
  const auto elapsed = Steady::now() - started;
  CAPTURE(message);
  CHECK(elapsed < budget);
  return message;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

#if DLOCK_TEST_FORK_WITH_THREADS  // only the fork test counts connections
long long connectionsReceived(RedisClient& client) {
  const std::string info = client.ok({"INFO", "stats"}).str;
  const auto at = info.find("total_connections_received:");
  REQUIRE(at != std::string::npos);
  return std::stoll(info.substr(at + 27));
}
#endif

}  // namespace

TEST_SUITE("Tls") {
  TEST_CASE("4 processes x 500 locked increments over rediss:// end exact") {
    TlsCertificates certificates;
    RedisProcess server(tlsServer(certificates.server(), certificates));
    // Not a plain connection by mistake: the server counts TLS clients apart (plain ones are refused
    // on its TLS port, see below).
    dlock::test::checkProcessIncrements(tlsUri(server, certificates), server, 4, 500);
  }

  TEST_CASE("4 processes x 500 locked increments over a Unix socket end exact") {
    RedisProcess::Options options;
    options.unixSocket = true;
    RedisProcess server(options);
    CHECK(dlock::connect("unix://" + server.socketPath())->describe() == "unix://" + server.socketPath());
    dlock::test::checkProcessIncrements("unix://" + server.socketPath(), server, 4, 500);
  }

  TEST_CASE("a Unix socket with a password and a database: AUTH and SELECT go over it") {
    RedisProcess::Options options;
    options.unixSocket = true;
    options.config = {"requirepass s3cret-unix"};
    RedisProcess server(options);
    auto lock = dlock::LockBuilder().backend(dlock::connect("unix://:s3cret-unix@" + server.socketPath() + "?db=3"))
                    .leaseTime(10s)
                    .build();
    REQUIRE(lock->tryLock("unix-key"));
    RedisClient client(server.host(), server.port());
    (void)client.ok({"AUTH", "s3cret-unix"});
    (void)client.ok({"SELECT", "3"});
    CHECK(client.ok({"EXISTS", "dlock:{unix-key}"}).integer == 1);
    lock->unlock("unix-key");

    const std::string message = failureOf<dlock::LockError>("unix://:wrong-pass@" + server.socketPath());
    CHECK(contains(message, "AUTH"));
    CHECK(!contains(message, "wrong-pass"));
  }

  TEST_CASE("a NUL in a host, a socket path, a TLS file or a server name given in code: ConfigError, not the name cut short") {
    // Each would reach what comes before the NUL, a server that does answer: getaddrinfo, the
    // kernel and OpenSSL read up to it.
    TlsCertificates certificates;
    RedisProcess::Options serverOptions = tlsServer(certificates.server(), certificates);
    serverOptions.unixSocket = true;
    RedisProcess server(serverOptions);
    const std::string nul("\0", 1);
    const auto refusal = [](dlock::ConnectionOptions connection) {
      dlock::SingleOptions options;
      options.connection = std::move(connection);
      options.connection.connectTimeout = kConnectTimeout;
      try {
        dlock::SingleOperator(options).probe();
      } catch (const dlock::ConfigError& error) {
        return std::string(error.what());
      } catch (const std::exception& error) {
        FAIL("an error of another type: " << error.what());
      }
      return std::string("connected");
    };
    dlock::ConnectionOptions host;
    host.host = "127.0.0.1" + nul + ".elsewhere.example";
    host.port = server.port();
    CHECK(refusal(host) == "dlock: the host name holds a NUL byte");
    dlock::ConnectionOptions socket;
    socket.unixSocket = server.socketPath() + nul + "-elsewhere";
    CHECK(refusal(socket) == "dlock: the Unix socket path holds a NUL byte");
    dlock::ConnectionOptions tls;
    tls.port = server.tlsPort();
    tls.tls.enabled = true;
    tls.tls.caFile = certificates.caFile();
    REQUIRE(refusal(tls) == "connected");
    tls.tls.caFile = certificates.caFile() + nul + "-elsewhere";
    CHECK(refusal(tls) == "dlock: tls_ca_file holds a NUL byte");
    tls.tls.caFile = certificates.caFile();
    tls.tls.serverName = "127.0.0.1" + nul + ".elsewhere.example";
    CHECK(refusal(tls) == "dlock: TLS: the server name holds a NUL byte");
  }

  TEST_CASE("the host name is verified too: localhost matches the certificate's DNS name") {
    TlsCertificates certificates;
    RedisProcess server(tlsServer(certificates.server(), certificates));
    auto backend = dlock::connect(tlsUri(server, certificates, "", "localhost"));
    CHECK(backend->describe() == "rediss://localhost:" + std::to_string(server.tlsPort()));
    auto lock = dlock::LockBuilder().backend(backend).build();
    CHECK(lock->tryLock("by-name"));
    lock->unlock("by-name");
  }

  TEST_CASE("a certificate from an unknown CA: ConnectionError naming the CA, within the connect timeout") {
    TlsCertificates certificates;
    RedisProcess server(tlsServer(certificates.otherCa(), certificates));
    const std::string message = failureOf<dlock::ConnectionError>(tlsUri(server, certificates));
    CHECK(contains(message, "not signed by a trusted CA"));
    CHECK(contains(message, "127.0.0.1:" + std::to_string(server.tlsPort())));
  }

  TEST_CASE("without tls_ca_file the system trust store is used, which does not know the test CA") {
    TlsCertificates certificates;
    RedisProcess server(tlsServer(certificates.server(), certificates));
    const std::string message = failureOf<dlock::ConnectionError>(
        "rediss://127.0.0.1:" + std::to_string(server.tlsPort()) + "?connect_timeout=2s");
    CHECK(contains(message, "not signed by a trusted CA"));
  }

  TEST_CASE("a certificate for another name: ConnectionError naming the mismatch, and tls_server_name fixes it") {
    TlsCertificates certificates;
    RedisProcess server(tlsServer(certificates.wrongName(), certificates));
    const std::string message = failureOf<dlock::ConnectionError>(tlsUri(server, certificates));
    CHECK(contains(message, "does not name '127.0.0.1'"));
    CHECK(contains(message, "name mismatch"));

    auto lock = dlock::LockBuilder()
                    .backend(dlock::connect(tlsUri(server, certificates, "tls_server_name=wrong.example.com")))
                    .build();
    CHECK(lock->tryLock("server-name"));
    lock->unlock("server-name");
  }

  TEST_CASE("an expired certificate: ConnectionError saying so") {
    TlsCertificates certificates;
    RedisProcess server(tlsServer(certificates.expired(), certificates));
    const std::string message = failureOf<dlock::ConnectionError>(tlsUri(server, certificates));
    CHECK(contains(message, "has expired"));
  }

  TEST_CASE("tls_verify=none connects to any certificate and warns at each connect") {
    TlsCertificates certificates;
    RedisProcess server(tlsServer(certificates.wrongName(), certificates));
    LogCapture log(spdlog::level::warn);
    auto lock = dlock::LockBuilder()
                    .backend(dlock::connect("rediss://127.0.0.1:" + std::to_string(server.tlsPort()) +
                                            "?tls_verify=none"))
                    .build();
    CHECK(lock->tryLock("unverified"));
    lock->unlock("unverified");
    CHECK(contains(log.text(), "without certificate verification (tls_verify=none)"));
  }

  TEST_CASE("a TLS client on a plain port: ConnectionError saying the port does not answer TLS") {
    TlsCertificates certificates;
    RedisProcess server(tlsServer(certificates.server(), certificates));
    // A plain server waits for the end of a line that a ClientHello never sends: the handshake
    // runs out of the connect timeout, and the message says what that likely means.
    const std::string message = failureOf<dlock::ConnectionError>(
        "rediss://127.0.0.1:" + std::to_string(server.port()) + "?connect_timeout=2s&tls_ca_file=" +
            certificates.caFile(),
        kConnectTimeout + 1s);
    CHECK(contains(message, "timed out"));
    CHECK(contains(message, "plain-text port"));
  }

  TEST_CASE("a plain client on a TLS port: ConnectionError pointing to rediss://") {
    TlsCertificates certificates;
    RedisProcess server(tlsServer(certificates.server(), certificates));
    const std::string message = failureOf<dlock::ConnectionError>(
        "redis://127.0.0.1:" + std::to_string(server.tlsPort()) + "?connect_timeout=2s&command_timeout=1s");
    CAPTURE(message);
    CHECK(contains(message, "rediss://"));
  }

  TEST_CASE("a missing or unusable key file: ConfigError naming the option, never the file's contents") {
    TlsCertificates certificates;
    RedisProcess server(tlsServer(certificates.server(), certificates, /*authClients=*/true));
    const TlsCertificates::Pair client = certificates.client();

    const std::string missing = failureOf<dlock::ConfigError>(
        tlsUri(server, certificates, "tls_cert_file=" + client.cert + "&tls_key_file=" + certificates.directory() +
                                         "/no-such.key"));
    CHECK(contains(missing, "tls_key_file"));
    CHECK(contains(missing, "No such file or directory"));

    // The certificate given as the key: not a key, and nothing of either file is quoted.
    const std::string wrong =
        failureOf<dlock::ConfigError>(tlsUri(server, certificates, "tls_cert_file=" + client.cert + "&tls_key_file=" +
                                                                       client.cert));
    CHECK(contains(wrong, "tls_key_file"));
    CHECK(contains(wrong, "private key"));
    CHECK(!contains(wrong, "BEGIN"));
    CHECK(!contains(wrong, "MII"));

    // Another client's key: it does not match the certificate.
    const std::string mismatched = failureOf<dlock::ConfigError>(tlsUri(
        server, certificates, "tls_cert_file=" + client.cert + "&tls_key_file=" + certificates.server().key));
    CAPTURE(mismatched);
    CHECK(contains(mismatched, "does not match tls_cert_file"));
  }

  TEST_CASE("mutual TLS: with the client certificate it works, without one an error says it is required") {
    TlsCertificates certificates;
    RedisProcess server(tlsServer(certificates.server(), certificates, /*authClients=*/true));
    const TlsCertificates::Pair client = certificates.client();
    auto lock = dlock::LockBuilder()
                    .backend(dlock::connect(tlsUri(server, certificates,
                                                   "tls_cert_file=" + client.cert + "&tls_key_file=" + client.key)))
                    .build();
    CHECK(lock->tryLock("mutual"));
    lock->unlock("mutual");

    const std::string message = failureOf<dlock::ConnectionError>(tlsUri(server, certificates));
    CAPTURE(message);
    CHECK(contains(message, "requires a client certificate"));
  }

  TEST_CASE("a password in a rediss:// URI never appears in a failure's message or the log") {
    TlsCertificates certificates;
    RedisProcess server(tlsServer(certificates.otherCa(), certificates));
    LogCapture log;
    const std::string message = failureOf<dlock::ConnectionError>(
        "rediss://alice:pa55-tls-word@127.0.0.1:" + std::to_string(server.tlsPort()) +
        "?connect_timeout=2s&tls_ca_file=" + certificates.caFile());
    CHECK(!contains(message, "pa55-tls-word"));
    CHECK(!contains(log.text(), "pa55-tls-word"));
  }

#if DLOCK_TEST_FORK_WITH_THREADS  // see tests/CMakeLists.txt: not in the sanitizer builds
  TEST_CASE("a TLS lock inherited across fork(): children make their own connections, the parent keeps its own") {
    TlsCertificates certificates;
    RedisProcess server(tlsServer(certificates.server(), certificates));
    std::shared_ptr<dlock::IOperator> backend = dlock::connect(tlsUri(server, certificates));
    auto lock = dlock::LockBuilder().backend(backend).build();
    dlock::test::exerciseBeforeFork(*lock, "tls-fork-lock");
    RedisProcess counterServer;  // apart, so that the TLS server counts dlock's connections only
    RedisClient tlsServer(server.host(), server.port());
    const long long before = connectionsReceived(tlsServer);
    // A child writing through the parent's TLS state would break the parent's stream (bad record
    // MAC on the server) and its own; each child's increments go through connections it opened.
    dlock::test::checkForkedIncrements(lock, backend, "tls-fork-lock", counterServer, 3, 3, 100, 60s);
    CHECK(connectionsReceived(tlsServer) >= before + 9);  // at least one per child
    REQUIRE(lock->tryLock("tls-fork-lock", 5s));
    lock->unlock("tls-fork-lock");
  }
#endif
}
