// SPDX-License-Identifier: Apache-2.0
// What a failed connect() says: a hint that fits the cause (a host and port, a socket path, a TLS
// failure that names its own fix, a database given as ?db=N) and the caller (lazy_connect=true is
// suggested only to callers that can use it), and no TLS hint for a plain server that shut down.
#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <string>

#include "RedisClient.h"
#include "RedisProcess.h"
#include "TestHelpers.h"
#include "TlsCertificates.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"

using namespace std::chrono_literals;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;
using dlock::test::TlsCertificates;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The message of the error connect(uri, options) throws, checked to be an `Error`.
template <class Error>
std::string connectFailure(const std::string& uri, const dlock::ConnectOptions& options = {}) {
  try {
    (void)dlock::connect(uri, options);
  } catch (const Error& error) {
    return error.what();
  } catch (const std::exception& error) {
    FAIL("an error of another type: " << error.what());
  }
  FAIL("connect to " << uri << " succeeded");
  return {};
}

RedisProcess::Options tlsServer(const TlsCertificates::Pair& certificate, const TlsCertificates& certificates) {
  RedisProcess::Options options;
  options.tls = RedisProcess::Tls{certificate.cert, certificate.key, certificates.caFile(), false};
  return options;
}

}  // namespace

TEST_SUITE("ConnectMessages") {
  TEST_CASE("a closed port: check the host and port, and lazy_connect only for a caller that can defer the check") {
    const std::string nobody = "redis://127.0.0.1:" + std::to_string(dlock::test::freeLoopbackPort());
    const std::string library = connectFailure<dlock::ConnectionError>(nobody);
    CAPTURE(library);
    CHECK(contains(library, "check the host and port in the URI and that the server is up"));
    CHECK(contains(library, "lazy_connect=true"));
    CHECK_FALSE(contains(library, "TLS"));

    dlock::ConnectOptions command;  // the dlock command: no lazy_connect to offer
    command.suggestLazy = false;
    const std::string tool = connectFailure<dlock::ConnectionError>(nobody, command);
    CAPTURE(tool);
    CHECK(contains(tool, "check the host and port in the URI"));
    CHECK_FALSE(contains(tool, "lazy_connect"));
  }

  TEST_CASE("a Unix socket nobody listens on: check the socket path, not a host and port") {
    dlock::test::TempDir dir;
    const std::string message = connectFailure<dlock::ConnectionError>("unix://" + dir.path() + "/none.sock");
    CAPTURE(message);
    CHECK(contains(message, "check the socket path in the URI"));
    CHECK_FALSE(contains(message, "host and port"));
    CHECK_FALSE(contains(message, "TLS"));
  }

  TEST_CASE("unix://...?db=N of a database the server lacks: check db= in the URI") {
    RedisProcess::Options options;
    options.unixSocket = true;
    RedisProcess server(options);
    const std::string message = connectFailure<dlock::BackendError>("unix://" + server.socketPath() + "?db=99");
    CAPTURE(message);
    CHECK(contains(message, "check db= in the URI"));
    CHECK_FALSE(contains(message, "/db at the end"));
  }

  TEST_CASE("a TLS name mismatch or an unknown CA: the TLS cause and its fix, no host-and-port hint") {
    TlsCertificates certificates;
    RedisProcess wrongName(tlsServer(certificates.wrongName(), certificates));
    const std::string mismatch = connectFailure<dlock::ConnectionError>(
        "rediss://127.0.0.1:" + std::to_string(wrongName.tlsPort()) + "?tls_ca_file=" + certificates.caFile());
    CAPTURE(mismatch);
    CHECK(contains(mismatch, "name mismatch"));
    CHECK_FALSE(contains(mismatch, "check the host and port"));

    RedisProcess otherCa(tlsServer(certificates.otherCa(), certificates));
    const std::string unknown = connectFailure<dlock::ConnectionError>(
        "rediss://127.0.0.1:" + std::to_string(otherCa.tlsPort()) + "?tls_ca_file=" + certificates.caFile());
    CAPTURE(unknown);
    CHECK(contains(unknown, "not signed by a trusted CA"));
    CHECK_FALSE(contains(unknown, "check the host and port"));
  }

  TEST_CASE("a plain server that shuts down under a command: no 'does the server expect TLS' hint") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    const auto backend = dlock::connect(server.uri() + "?command_timeout=30s", dlock::ConnectOptions{true});
    // Writes wait while the clients are paused: the acquire (a script that writes) is held by the
    // server, unanswered, on a connection that is new.
    admin.ok({"CLIENT", "PAUSE", "30000", "WRITE"});
    auto acquire = std::async(std::launch::async, [&]() -> std::string {
      try {
        (void)backend->lock("k", "token-1", 30s);
      } catch (const dlock::ConnectionError& error) {
        return error.what();
      }
      return "acquired";
    });
    REQUIRE(dlock::test::eventually([&] { return dlock::test::infoField(admin, "blocked_clients") == "1"; }));
    try {
      (void)admin.command({"SHUTDOWN", "NOSAVE"});
    } catch (const std::runtime_error&) {  // no answer: the server is gone
    }
    const std::string message = acquire.get();
    CAPTURE(message);
    CHECK(contains(message, "closed the connection"));
    CHECK_FALSE(contains(message, "TLS"));
    server.kill();  // reaped
  }
}
