// SPDX-License-Identifier: Apache-2.0
// LinkProxy in front of a real server: each mode and action as a client sees it, on raw sockets
// (bytes, resets and timing below any Redis client).
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "LinkProxy.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "TestHelpers.h"

using namespace std::chrono_literals;
using dlock::test::kEventBudget;
using dlock::test::LinkProxy;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;
using dlock::test::eventually;
using Steady = std::chrono::steady_clock;

namespace {

// One client connection to a loopback port, speaking RESP inline commands.
class Peer {
 public:
  explicit Peer(int port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  }
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;
  ~Peer() { ::close(fd_); }

  // Sends all of `bytes`; false when the connection is gone.
  bool send(std::string_view bytes) {
    while (connected_ && !bytes.empty()) {
      const ssize_t sent = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (sent < 0 && errno == EINTR) continue;
      if (sent <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(sent));
    }
    return connected_;
  }

  // Reads until what arrived ends with `suffix`; what arrived. Throws when the connection ends or
  // `budget` runs out first.
  std::string readUntil(std::string_view suffix, std::chrono::milliseconds budget = kEventBudget) {
    const auto deadline = Steady::now() + budget;
    while (received_.size() < suffix.size() ||
           received_.compare(received_.size() - suffix.size(), suffix.size(), suffix) != 0) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Steady::now());
      if (left <= 0ms || !readSome(left)) {
        throw std::runtime_error("no '" + std::string(suffix) + "' (got '" + received_ + "')");
      }
    }
    return std::exchange(received_, {});
  }

  // True when the answer to `command` ends with `reply`; false when the connection fails first.
  bool asks(std::string_view command, std::string_view reply) {
    if (!send(command)) return false;
    try {
      (void)readUntil(reply);
      return true;
    } catch (const std::runtime_error&) {
      return false;
    }
  }

  // What arrives within `window`: only to show that nothing was answered yet.
  std::string readFor(std::chrono::milliseconds window) {
    const auto deadline = Steady::now() + window;
    while (true) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Steady::now());
      if (left <= 0ms || !readSome(left)) break;
    }
    return std::exchange(received_, {});
  }

  // Waits until the connection ends: 0 for an EOF, else the errno of the failed read (ECONNRESET
  // for an RST); -1 when `budget` ran out with the connection open.
  int waitClosed(std::chrono::milliseconds budget = kEventBudget) {
    const auto deadline = Steady::now() + budget;
    while (Steady::now() < deadline) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Steady::now());
      if (!readSome(left) && ended_) return error_;
    }
    return -1;
  }

 private:
  // Appends what one read brings; false on timeout or once the connection ended.
  bool readSome(std::chrono::milliseconds budget) {
    if (ended_) return false;
    pollfd polled{fd_, POLLIN, 0};
    if (::poll(&polled, 1, static_cast<int>(budget.count())) <= 0) return false;
    char buffer[65536];
    const ssize_t got = ::recv(fd_, buffer, sizeof buffer, 0);
    if (got < 0 && errno == EINTR) return true;
    if (got <= 0) {
      ended_ = true;
      error_ = got == 0 ? 0 : errno;
      return false;
    }
    received_.append(buffer, static_cast<std::size_t>(got));
    return true;
  }

  int fd_;
  bool connected_ = false;
  bool ended_ = false;
  int error_ = 0;
  std::string received_;
};

double millisSince(Steady::time_point start) {
  return std::chrono::duration<double, std::milli>(Steady::now() - start).count();
}

}  // namespace

TEST_SUITE("LinkProxy") {
  TEST_CASE("a passing link forwards a PING and its PONG") {
    RedisProcess server;
    LinkProxy proxy(server.host(), server.port());
    CHECK(proxy.mode() == LinkProxy::Mode::pass);
    CHECK(proxy.uri() == "redis://127.0.0.1:" + std::to_string(proxy.port()));
    Peer peer(proxy.port());
    CHECK(peer.asks("PING\r\n", "+PONG\r\n"));
    CHECK(proxy.openConnections() == 1);
    CHECK(proxy.acceptedConnections() == 1);
  }

  TEST_CASE("rewritten replies carry the other number only where it stands whole, also split across reads") {
    RedisProcess server;
    LinkProxy proxy(server.host(), server.port());
    proxy.rewriteReplies({{"41234", "50001"}});
    Peer peer(proxy.port());
    // Whole numbers are rewritten; one inside a longer number is not.
    REQUIRE(peer.asks("SET a \"127.0.0.1:41234 x41234y 141234 412345\"\r\n", "+OK\r\n"));
    REQUIRE(peer.send("GET a\r\n"));
    CHECK(peer.readUntil("412345\r\n") == "$37\r\n127.0.0.1:50001 x50001y 141234 412345\r\n");
    // A value of 600 KB comes in many reads: numbers cut by a read's end are rewritten too.
    std::string value;
    while (value.size() < 600000) value += " 41234";
    REQUIRE(peer.asks("*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$" + std::to_string(value.size()) + "\r\n" + value + "\r\n",
                      "+OK\r\n"));
    REQUIRE(peer.send("GET b\r\n"));
    const std::string got = peer.readUntil(" 50001\r\n", 20s);
    CHECK(got.find("41234") == std::string::npos);
    CHECK(got.size() == value.size() + std::to_string(value.size()).size() + 5);
  }

  TEST_CASE("a delayed link makes a round trip last at least the latency each way") {
    RedisProcess server;
    LinkProxy proxy(server.host(), server.port());
    Peer peer(proxy.port());
    REQUIRE(peer.asks("PING\r\n", "+PONG\r\n"));

    proxy.delay(200ms);
    CHECK(proxy.mode() == LinkProxy::Mode::delay);
    auto start = Steady::now();
    REQUIRE(peer.asks("PING\r\n", "+PONG\r\n"));
    CHECK(millisSince(start) >= 400.0);

    proxy.delay(200ms, LinkProxy::Direction::toTarget);
    start = Steady::now();
    REQUIRE(peer.asks("PING\r\n", "+PONG\r\n"));
    CHECK(millisSince(start) >= 200.0);
  }

  TEST_CASE("a delayed link keeps the order of many pipelined commands") {
    RedisProcess server;
    LinkProxy proxy(server.host(), server.port());
    proxy.delay(50ms);
    Peer peer(proxy.port());
    std::string expected;
    for (int batch = 0; batch < 100; ++batch) {  // many writes, so many chunks in the proxy
      std::string commands;
      for (int i = 1; i <= 10; ++i) {
        commands += "INCR n\r\n";
        expected += ":" + std::to_string(batch * 10 + i) + "\r\n";
      }
      REQUIRE(peer.send(commands));
    }
    CHECK(peer.readUntil(":1000\r\n") == expected);
  }

  TEST_CASE("a value larger than the socket buffers crosses a delayed link whole") {
    RedisProcess server;
    LinkProxy proxy(server.host(), server.port());
    proxy.delay(20ms);
    RedisClient client(server.host(), proxy.port(), kEventBudget);
    std::string value(16u << 20, 'v');
    for (std::size_t i = 0; i < value.size(); i += 4099) value[i] = static_cast<char>('a' + i % 26);
    client.ok({"SET", "big", value});
    CHECK(client.ok({"GET", "big"}).str == value);
  }

  TEST_CASE("a blackholed link answers nothing and closes nothing until it heals, then forwards what waited") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    LinkProxy proxy(server.host(), server.port());
    Peer peer(proxy.port());
    REQUIRE(peer.asks("PING\r\n", "+PONG\r\n"));

    proxy.blackhole();
    CHECK(proxy.mode() == LinkProxy::Mode::blackhole);
    REQUIRE(peer.send("INCR n\r\n"));
    CHECK(peer.readFor(300ms).empty());  // not answered yet
    CHECK(proxy.openConnections() == 1);
    CHECK(admin.ok({"EXISTS", "n"}).integer == 0);  // and not run: the request waits in the proxy

    proxy.pass();
    CHECK(peer.readUntil(":1\r\n") == ":1\r\n");
  }

  TEST_CASE("a link blackholed toward the target still passes what the target pushes") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    LinkProxy proxy(server.host(), server.port());
    Peer subscriber(proxy.port());
    REQUIRE(subscriber.asks("SUBSCRIBE ch\r\n", ":1\r\n"));

    proxy.blackhole(LinkProxy::Direction::toTarget);
    REQUIRE(subscriber.send("PING\r\n"));
    REQUIRE(admin.ok({"PUBLISH", "ch", "hello"}).integer == 1);
    CHECK(subscriber.readUntil("$5\r\nhello\r\n") == "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n");

    proxy.pass();  // the PING waited; a subscribed RESP2 client gets it back as a pong message
    CHECK(subscriber.readUntil("$0\r\n\r\n") == "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
  }

  TEST_CASE("a link delayed toward the target does not delay what the target pushes") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    LinkProxy proxy(server.host(), server.port());
    Peer subscriber(proxy.port());
    REQUIRE(subscriber.asks("SUBSCRIBE ch\r\n", ":1\r\n"));

    // Far longer than the wait for the message: it comes only if the way back is not delayed.
    proxy.delay(10min, LinkProxy::Direction::toTarget);
    REQUIRE(admin.ok({"PUBLISH", "ch", "hello"}).integer == 1);
    CHECK(subscriber.readUntil("$5\r\nhello\r\n") == "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n");
  }

  TEST_CASE("a refusing link resets the open connections and fails new ones until it passes again") {
    RedisProcess server;
    LinkProxy proxy(server.host(), server.port());
    Peer open(proxy.port());
    REQUIRE(open.asks("PING\r\n", "+PONG\r\n"));

    proxy.refuse();
    CHECK(proxy.mode() == LinkProxy::Mode::refuse);
    CHECK(proxy.openConnections() == 0);
    CHECK(open.waitClosed() == ECONNRESET);
    Peer refused(proxy.port());
    CHECK_FALSE(refused.asks("PING\r\n", "+PONG\r\n"));
    CHECK(proxy.acceptedConnections() == 1);

    proxy.pass();
    Peer again(proxy.port());
    CHECK(again.asks("PING\r\n", "+PONG\r\n"));
  }

  TEST_CASE("resetAll closes every open connection with an RST before it returns, and the mode stays") {
    RedisProcess server;
    LinkProxy proxy(server.host(), server.port());
    Peer first(proxy.port());
    Peer second(proxy.port());
    REQUIRE(first.asks("PING\r\n", "+PONG\r\n"));
    REQUIRE(second.asks("PING\r\n", "+PONG\r\n"));
    REQUIRE(proxy.openConnections() == 2);

    proxy.resetAll();
    CHECK(proxy.openConnections() == 0);
    CHECK(first.waitClosed() == ECONNRESET);
    CHECK(second.waitClosed() == ECONNRESET);
    CHECK(proxy.mode() == LinkProxy::Mode::pass);
    Peer next(proxy.port());
    CHECK(next.asks("PING\r\n", "+PONG\r\n"));
    CHECK(proxy.acceptedConnections() == 3);
  }

  TEST_CASE("a replication delay holds the writes a replica streams, not a client's commands on the same link") {
    RedisProcess master;
    LinkProxy proxy(master.host(), master.port());
    RedisProcess::Options replicating;
    replicating.config = {"replicaof 127.0.0.1 " + std::to_string(proxy.port())};
    RedisProcess replica(replicating);
    RedisClient onMaster(master.host(), master.port());
    RedisClient onReplica(replica.host(), replica.port());
    const auto has = [&](const std::string& key) { return !onReplica.ok({"GET", key}).isNil(); };
    // In sync: a write reaches the replica, over a connection the proxy took for replication.
    onMaster.ok({"SET", "before", "1"});
    REQUIRE(eventually([&] { return has("before"); }));
    REQUIRE(proxy.replicationConnections() == 1);

    proxy.delayReplication(10min);
    onMaster.ok({"SET", "during", "1"});
    Peer client(proxy.port());
    const auto start = Steady::now();
    CHECK(client.asks("PING\r\n", "+PONG\r\n"));
    CHECK(millisSince(start) < 1000);
    // Absence needs a window: the write would be there within milliseconds without the delay.
    CHECK_FALSE(eventually([&] { return has("during"); }, 500ms));

    proxy.passReplication();
    CHECK(eventually([&] { return has("during"); }));
    CHECK(proxy.replicationConnections() == 1);  // delayed, not broken: no new sync
  }

  TEST_CASE("delayReplicationOf holds one replica's stream and lets the other's through") {
    RedisProcess master;
    LinkProxy proxy(master.host(), master.port());
    // A replica opens with REPLCONF listening-port <replica-announce-port>: that tells them apart.
    const auto replicaAnnouncing = [&](int port) {
      RedisProcess::Options options;
      options.config = {"replicaof 127.0.0.1 " + std::to_string(proxy.port()),
                        "replica-announce-port " + std::to_string(port)};
      return std::make_unique<RedisProcess>(options);
    };
    const auto lagging = replicaAnnouncing(40001);
    const auto current = replicaAnnouncing(40002);
    RedisClient onMaster(master.host(), master.port());
    RedisClient onLagging(lagging->host(), lagging->port());
    RedisClient onCurrent(current->host(), current->port());
    onMaster.ok({"SET", "before", "1"});
    REQUIRE(eventually([&] { return !onLagging.ok({"GET", "before"}).isNil() && !onCurrent.ok({"GET", "before"}).isNil(); }));

    proxy.delayReplicationOf("listening-port\r\n$5\r\n40001\r\n", 10min);
    onMaster.ok({"SET", "during", "1"});
    CHECK(eventually([&] { return !onCurrent.ok({"GET", "during"}).isNil(); }));
    CHECK(onLagging.ok({"GET", "during"}).isNil());

    proxy.passReplication();
    CHECK(eventually([&] { return !onLagging.ok({"GET", "during"}).isNil(); }));
  }

  TEST_CASE("blackholeClientsSending cuts only the connections whose client sent the marker, until pass") {
    RedisProcess server;
    LinkProxy proxy(server.host(), server.port());
    Peer marked(proxy.port());
    Peer other(proxy.port());
    REQUIRE(marked.asks("ECHO node-a\r\n", "$6\r\nnode-a\r\n"));
    REQUIRE(other.asks("PING\r\n", "+PONG\r\n"));

    proxy.blackholeClientsSending("node-a", 5);  // after "ECHO "
    Peer late(proxy.port());  // "node-a" elsewhere than at byte 5: not cut
    REQUIRE(late.asks("ECHO x-node-a\r\n", "$8\r\nx-node-a\r\n"));
    CHECK(marked.send("PING\r\n"));
    CHECK(other.asks("PING\r\n", "+PONG\r\n"));
    CHECK(marked.readFor(300ms).empty());

    proxy.pass();
    CHECK(marked.readUntil("+PONG\r\n") == "+PONG\r\n");
  }

  TEST_CASE("retarget sends new connections to the new port and resets the open ones") {
    RedisProcess first;
    RedisProcess second;
    RedisClient(first.host(), first.port()).ok({"SET", "who", "first"});
    RedisClient(second.host(), second.port()).ok({"SET", "who", "second"});
    LinkProxy proxy(first.host(), first.port());
    Peer before(proxy.port());
    REQUIRE(before.asks("GET who\r\n", "$5\r\nfirst\r\n"));

    proxy.retarget(second.port());
    CHECK(proxy.targetPort() == second.port());
    CHECK(before.waitClosed() == ECONNRESET);
    Peer after(proxy.port());
    CHECK(after.asks("GET who\r\n", "$6\r\nsecond\r\n"));
  }

  TEST_CASE("a connection whose target refuses is closed by the proxy") {
    LinkProxy proxy("127.0.0.1", dlock::test::freeLoopbackPort());
    Peer peer(proxy.port());
    CHECK_FALSE(peer.asks("PING\r\n", "+PONG\r\n"));
    CHECK(eventually([&] { return proxy.openConnections() == 0; }));
  }

  TEST_CASE("a held connection's bytes wait until release, and connections from before pass") {
    RedisProcess server;
    LinkProxy proxy(server.host(), server.port());
    Peer before(proxy.port());
    REQUIRE(before.asks("PING\r\n", "+PONG\r\n"));

    proxy.holdNewConnections();
    Peer held(proxy.port());
    REQUIRE(held.send("ECHO first\r\n"));
    REQUIRE(held.send("ECHO second\r\n"));
    CHECK(proxy.waitForHeld("second", kEventBudget));
    CHECK_FALSE(proxy.waitForHeld("third", 0ms));
    CHECK(before.asks("PING\r\n", "+PONG\r\n"));
    CHECK(held.readFor(300ms).empty());  // not answered yet

    proxy.release();
    CHECK(held.readUntil("$6\r\nsecond\r\n") == "$5\r\nfirst\r\n$6\r\nsecond\r\n");
    Peer after(proxy.port());
    CHECK(after.asks("PING\r\n", "+PONG\r\n"));
  }

  TEST_CASE("loseNextReply lets the next request run and closes its connection instead of answering") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    LinkProxy proxy(server.host(), server.port());
    Peer peer(proxy.port());
    REQUIRE(peer.asks("PING\r\n", "+PONG\r\n"));

    proxy.loseNextReply();
    REQUIRE(peer.send("INCR n\r\n"));
    CHECK(peer.waitClosed() == 0);
    CHECK(proxy.waitReplyLost(kEventBudget));
    CHECK(admin.ok({"GET", "n"}).str == "1");
    Peer next(proxy.port());  // lost once: the next connection is answered
    CHECK(next.asks("INCR n\r\n", ":2\r\n"));
  }
}
