// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "KeysLeftBehind.h"
#include "LogCapture.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "TestHelpers.h"
#include "dlock/IOwnerRecorder.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/single/SingleOperator.h"

using namespace std::chrono_literals;
using dlock::test::LogCapture;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;
using dlock::test::extendedFlags;

TEST_SUITE("SingleOperator") {
  TEST_CASE("lock, unlock, extend and inspect against a real server") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto backend = dlock::connect(server.uri());
    const auto taken = backend->lock("k", "token-1", 5000ms);
    REQUIRE(taken.acquired);
    CHECK(taken.fencingToken > 0);
    CHECK(client.ok({"GET", "dlock:{k}"}).str == "token-1");
    CHECK(client.ok({"GET", "dlock:{k}:fence"}).str == std::to_string(taken.fencingToken));
    const auto pttl = client.ok({"PTTL", "dlock:{k}"}).integer;
    CHECK(pttl > 0);
    CHECK(pttl <= 5000);

    const auto busy = backend->lock("k", "token-2", 5000ms);
    CHECK_FALSE(busy.acquired);
    CHECK(busy.holderTtl > 0ms);
    CHECK(busy.holderTtl <= 5000ms);

    CHECK_FALSE(backend->extend("k", "token-2", 60000ms));
    CHECK(backend->extend("k", "token-1", 60000ms));
    CHECK(client.ok({"PTTL", "dlock:{k}"}).integer > 5000);
    const auto info = backend->inspect("k");
    CHECK(info.held);
    CHECK(info.fencingToken == taken.fencingToken);

    CHECK_FALSE(backend->unlock("k", "token-2").released);
    CHECK(backend->unlock("k", "token-1").released);
    CHECK(client.ok({"EXISTS", "dlock:{k}"}).integer == 0);
    CHECK(backend->lock("k", "token-3", 5000ms).fencingToken > taken.fencingToken);
  }

  TEST_CASE("after a restart every pooled connection is dead, and the next call still runs at its first try") {
    RedisProcess server;
    auto backend = dlock::connect(server.uri() + "?pool_size=4");
    {
      // Four calls at once while the server sleeps: each opens a connection of its own.
      RedisClient sleeper(server.host(), server.port());
      std::thread sleep([&] { (void)sleeper.command({"DEBUG", "SLEEP", "1"}); });
      REQUIRE(dlock::test::eventually([&] { return dlock::test::inNanosleep(server.pid()); }));
      std::vector<std::thread> callers;
      for (int i = 0; i < 4; ++i) {
        callers.emplace_back([&backend, i] {
          (void)backend->lock("k" + std::to_string(i), "token-" + std::to_string(i), 60000ms);
        });
      }
      for (auto& caller : callers) caller.join();
      sleep.join();
    }
    RedisClient client(server.host(), server.port());
    REQUIRE(client.ok({"INFO", "clients"}).str.find("connected_clients:5") != std::string::npos);
    server.kill();
    server.restart();
    // The first pooled connection turns out dead; the retry must not take another dead one.
    CHECK(backend->lock("after", "token-after", 60000ms).acquired);
  }

  TEST_CASE("fencing tokens keep rising after the server lost its fence counter (a restart without persistence)") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto backend = dlock::connect(server.uri());
    std::uint64_t last = 0;
    for (int i = 0; i < 5; ++i) {
      const auto taken = backend->lock("k", "token-" + std::to_string(i), 5000ms);
      REQUIRE(taken.acquired);
      CHECK(taken.fencingToken > last);
      last = taken.fencingToken;
      REQUIRE(backend->unlock("k", "token-" + std::to_string(i)).released);
    }
    (void)client.ok({"FLUSHALL"});  // what a restart without persistence leaves
    const auto after = backend->lock("k", "token-after", 5000ms);
    REQUIRE(after.acquired);
    CHECK(after.fencingToken > last);
  }

  TEST_CASE("a fence counter above the clock still rises by one per acquisition") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto backend = dlock::connect(server.uri());
    // Far ahead of the clock in microseconds (as after a clock that went back), below 2^53.
    (void)client.ok({"SET", "dlock:{k}:fence", "9000000000000000"});
    CHECK(backend->lock("k", "a", 5000ms).fencingToken == 9000000000000001ULL);
    CHECK(client.ok({"GET", "dlock:{k}:fence"}).str == "9000000000000001");
    REQUIRE(backend->unlock("k", "a").released);
    CHECK(backend->lock("k", "b", 5000ms).fencingToken == 9000000000000002ULL);
  }

  TEST_CASE("fencing tokens are exact above 2^53: each acquisition gets a new one, and none goes back") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto backend = dlock::connect(server.uri());
    constexpr std::uint64_t k2p53 = 9007199254740992ULL;
    CHECK(backend->raiseFence("k", k2p53 + 1) == k2p53 + 1);  // a double would say 2^53
    std::uint64_t last = k2p53 + 1;
    for (int i = 0; i < 3; ++i) {
      const std::string token = "t" + std::to_string(i);
      const auto taken = backend->lock("k", token, 5000ms);
      REQUIRE(taken.acquired);
      CHECK(taken.fencingToken == last + 1);
      CHECK(backend->inspect("k").fencingToken == last + 1);
      last = taken.fencingToken;
      REQUIRE(backend->unlock("k", token).released);
    }
    CHECK(client.ok({"GET", "dlock:{k}:fence"}).str == std::to_string(last));
    CHECK(backend->raiseFence("k", last - 1) == last);  // never lowered
  }

  TEST_CASE("a fencing counter at 2^63 - 1 refuses the next acquisition before the key is set") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto backend = dlock::connect(server.uri());
    CHECK(backend->raiseFence("k", dlock::kMaxFencingToken) == dlock::kMaxFencingToken);
    CHECK_THROWS_AS((void)backend->lock("k", "t", 5000ms), dlock::BackendError);
    CHECK(client.ok({"EXISTS", "dlock:{k}"}).integer == 0);  // no error after the key was set
    CHECK(client.ok({"GET", "dlock:{k}:fence"}).str == std::to_string(dlock::kMaxFencingToken));
    (void)client.ok({"CONFIG", "RESETSTAT"});
    CHECK_THROWS_AS((void)backend->raiseFence("k", dlock::kMaxFencingToken + 1), dlock::InvalidArgumentError);
    const std::string stats = client.ok({"INFO", "commandstats"}).str;
    CHECK(stats.find("cmdstat_eval") == std::string::npos);  // refused before anything was sent
  }

  TEST_CASE("fencing counters expire a long while after their last acquisition, and tokens still rise after") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto backend = dlock::connect(server.uri());
    const auto first = backend->lock("k", "a", 5000ms);
    REQUIRE(first.acquired);
    const auto fenceTtl = client.ok({"PTTL", "dlock:{k}:fence"}).integer;
    CHECK(fenceTtl > 23LL * 3600 * 1000);  // a day by default
    CHECK(fenceTtl <= 24LL * 3600 * 1000);
    auto hourly = dlock::connect(server.uri() + "?fence_ttl=1h");
    REQUIRE(hourly->lock("other", "x", 5000ms).acquired);
    CHECK(client.ok({"PTTL", "dlock:{other}:fence"}).integer <= 3600LL * 1000);
    CHECK(client.ok({"PTTL", "dlock:{other}:fence"}).integer > 3500LL * 1000);
    CHECK_THROWS_AS((void)dlock::connect(server.uri() + "?fence_ttl=3600"), dlock::ConfigError);  // no unit
    REQUIRE(backend->unlock("k", "a").released);
    (void)client.ok({"DEL", "dlock:{k}:fence"});  // what its TTL does a day later
    const auto after = backend->lock("k", "b", 5000ms);
    REQUIRE(after.acquired);
    CHECK(after.fencingToken > first.fencingToken);  // floored at the server's clock
    REQUIRE(backend->unlock("k", "b").released);
    dlock::test::checkEveryLockKeyHasTtl(client);
  }

  TEST_CASE("an owner label lives beside its lease: written, renewed and removed with it, and a default lock writes none") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto backend = dlock::connect(server.uri());
    auto* recorder = dynamic_cast<dlock::IOwnerRecorder*>(backend.get());
    REQUIRE(recorder != nullptr);

    REQUIRE(backend->lock("plain", "token-0", 5000ms).acquired);
    CHECK(client.ok({"EXISTS", "dlock:{plain}:owner"}).integer == 0);
    CHECK(backend->inspect("plain").owner.empty());
    REQUIRE(backend->unlock("plain", "token-0").released);

    const std::string label("host=a pid=1 nul\0crlf\r\n%s{}", 27);
    const auto before = std::chrono::system_clock::now();
    const auto taken = recorder->lockRecordingOwner("k", "token-1", 5000ms, label);
    REQUIRE(taken.acquired);
    const long long pttl = client.ok({"PTTL", "dlock:{k}:owner"}).integer;
    CHECK(pttl > 0);
    CHECK(pttl <= 5000);
    dlock::LeaseInfo info = backend->inspect("k");
    CHECK(info.held);
    CHECK(info.owner == label);  // binary-safe both ways
    CHECK(info.ownerSince >= std::chrono::time_point_cast<std::chrono::seconds>(before) - 1s);
    CHECK(info.ownerSince <= std::chrono::system_clock::now() + 1s);  // the same machine's clock

    // A retried acquire keeps the first record; renewals carry it with the lease.
    CHECK(recorder->lockRecordingOwner("k", "token-1", 5000ms, "other").fencingToken == taken.fencingToken);
    CHECK(backend->inspect("k").owner == label);
    REQUIRE(backend->extend("k", "token-1", 60000ms));
    CHECK(client.ok({"PTTL", "dlock:{k}:owner"}).integer > 5000);
    REQUIRE(extendedFlags(backend->extendAll({{"k", "token-1"}}, 120000ms)) == std::vector<bool>{true});
    CHECK(client.ok({"PTTL", "dlock:{k}:owner"}).integer > 60000);
    CHECK(backend->inspect("k").ownerSince == info.ownerSince);

    // Someone else's release changes nothing; ours removes the record with the key.
    CHECK_FALSE(backend->extend("k", "token-2", 1000ms));
    CHECK_FALSE(backend->unlock("k", "token-2").released);
    CHECK(client.ok({"EXISTS", "dlock:{k}:owner"}).integer == 1);
    REQUIRE(backend->unlock("k", "token-1").released);
    CHECK(client.ok({"EXISTS", "dlock:{k}:owner"}).integer == 0);

    // A record that is not the holder's is never shown as its owner.
    client.ok({"SET", "dlock:{k}:owner", "token-9\n1\nstale", "PX", "60000"});
    REQUIRE(backend->lock("k", "token-3", 5000ms).acquired);
    CHECK(backend->inspect("k").owner.empty());
    REQUIRE(backend->unlock("k", "token-3").released);
    client.ok({"DEL", "dlock:{k}:owner"});

    // An expiring lease takes its record with it, at the same moment.
    REQUIRE(recorder->lockRecordingOwner("e", "token-e", 200ms, "short").acquired);
    CHECK(client.ok({"PTTL", "dlock:{e}:owner"}).integer > 0);
    REQUIRE(dlock::test::eventually([&] { return client.ok({"EXISTS", "dlock:{e}"}).integer == 0; }));
    CHECK(client.ok({"EXISTS", "dlock:{e}:owner"}).integer == 0);

    // Through the lock: a reentrant hold keeps the one record; the last unlock removes it.
    auto lock = dlock::LockBuilder().backend(backend).ownerLabel("svc").build();
    REQUIRE(lock->tryLock("r"));
    const std::string recorded = backend->inspect("r").owner;
    CHECK(recorded.rfind("host=", 0) == 0);
    CHECK(recorded.find(" pid=" + std::to_string(::getpid()) + " svc") != std::string::npos);
    REQUIRE(lock->tryLock("r"));
    lock->unlock("r");
    CHECK(backend->inspect("r").owner == recorded);
    lock->unlock("r");
    CHECK(client.ok({"EXISTS", "dlock:{r}:owner"}).integer == 0);
    dlock::test::checkEveryLockKeyHasTtl(client);
  }

  TEST_CASE("10,000 distinct keys locked and released leave no key without a TTL") {
    RedisProcess server;
    std::vector<RedisClient> servers;
    servers.emplace_back(server.host(), server.port());
    dlock::test::checkNoKeyLeftWithoutTtl(dlock::connect(server.uri()), servers);
  }
}

TEST_SUITE("SingleOperator") {
  TEST_CASE("binary keys are stored as exactly those bytes") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri())).leaseTime(10s).build();
    const std::vector<std::string> keys = {std::string("nul\0byte", 8), "crlf\r\nSET x y\r\n", "with spaces",
                                           "{braces}", "%s%n%x", std::string("\0", 1), "\xff\xfe\x80"};
    for (const auto& key : keys) {
      REQUIRE(lock->tryLock(key));
      const std::string redisKey = "dlock:{" + key + "}";
      const auto stored = client.ok({"GET", redisKey});
      CHECK(stored.type == REDIS_REPLY_STRING);
      CHECK(stored.str.size() == 32);  // our token
      CHECK(client.ok({"PTTL", redisKey}).integer > 0);
    }
    // Nothing else was created: a CRLF in a key did not become a command.
    CHECK(client.ok({"EXISTS", "x"}).integer == 0);
    for (const auto& key : keys) lock->unlock(key);
    CHECK(client.ok({"KEYS", "dlock:{*}"}).elements.empty());
  }

  TEST_CASE("no server listening gives ConnectionError within the connect timeout") {
    dlock::SingleOptions options;
    options.connection.host = "127.0.0.1";
    options.connection.port = dlock::test::freeLoopbackPort();  // nothing listens there
    options.connection.connectTimeout = 500ms;
    options.connection.commandTimeout = 500ms;
    dlock::SingleOperator backend(options);
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_AS((void)backend.lock("k", "t", 1000ms), dlock::ConnectionError);
    CHECK(std::chrono::steady_clock::now() - start < 2s);
    try {
      (void)backend.lock("k", "t", 1000ms);
    } catch (const dlock::ConnectionError& error) {
      CHECK(std::string(error.what()).find("127.0.0.1:" + std::to_string(options.connection.port)) !=
            std::string::npos);
    }
  }

  TEST_CASE("SCRIPT FLUSH between two calls: the next call reloads the script") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto backend = dlock::connect(server.uri());
    REQUIRE(backend->lock("k", "t", 5000ms).acquired);
    client.ok({"SCRIPT", "FLUSH"});
    CHECK(backend->unlock("k", "t").released);
    client.ok({"SCRIPT", "FLUSH"});
    CHECK(backend->lock("k", "t", 5000ms).acquired);
    client.ok({"SCRIPT", "FLUSH"});
    CHECK(extendedFlags(backend->extendAll({{"k", "t"}, {"other", "t"}}, 5000ms)) == std::vector<bool>{true, false});
    CHECK(client.commandCalls()["eval"] >= 3);
  }

  TEST_CASE("AUTH with a password, with an ACL user, and a wrong password") {
    RedisProcess::Options config;
    config.config = {"requirepass s3cret-pw", "user alice on >alice-pw ~dlock:* &dlock:* +@all"};
    RedisProcess server(config);
    const std::string address = server.host() + ":" + std::to_string(server.port());

    auto withPassword = dlock::connect("redis://:s3cret-pw@" + address);
    CHECK(withPassword->lock("a", "t", 5000ms).acquired);

    auto asAlice = dlock::connect("redis://alice:alice-pw@" + address);
    CHECK(asAlice->lock("b", "t", 5000ms).acquired);
    CHECK(asAlice->unlock("b", "t").released);

    // connect() checks the password at once and names the fix.
    try {
      (void)dlock::connect("redis://alice:not-her-password@" + address);
      FAIL("a wrong password must fail at connect");
    } catch (const dlock::BackendError& error) {
      const std::string what = error.what();
      CAPTURE(what);
      CHECK(what.find("the server refused the password (WRONGPASS): check user:password in the URI") !=
            std::string::npos);
      CHECK(what.find("AUTH as user 'alice'") != std::string::npos);
      CHECK(what.find("not-her-password") == std::string::npos);
    }
    try {
      (void)dlock::connect("redis://" + address);
      FAIL("a missing password must fail at connect");
    } catch (const dlock::BackendError& error) {
      CHECK_MESSAGE(std::string(error.what()).find("(NOAUTH): give it in the URI") != std::string::npos, error.what());
    }

    // lazy_connect=true: the first call meets it, as before.
    auto wrong = dlock::connect("redis://alice:not-her-password@" + address + "?lazy_connect=true");
    try {
      (void)wrong->lock("c", "t", 5000ms);
      FAIL("a wrong password must fail");
    } catch (const dlock::BackendError& error) {
      const std::string what = error.what();
      CHECK(what.find("AUTH as user 'alice'") != std::string::npos);
      CHECK(what.find("WRONGPASS") != std::string::npos);
      CHECK(what.find("not-her-password") == std::string::npos);
    }
    auto none = dlock::connect("redis://" + address, dlock::ConnectOptions{true});
    CHECK_THROWS_AS((void)none->lock("d", "t", 5000ms), dlock::BackendError);  // NOAUTH
  }

  TEST_CASE("connect fails at once, naming the fix, on a server that is not there or a database it lacks") {
    const std::string nobody = "redis://127.0.0.1:" + std::to_string(dlock::test::freeLoopbackPort());
    LogCapture log;
    try {
      (void)dlock::connect(nobody + "?connect_timeout=500ms");
      FAIL("connect to a closed port succeeded");
    } catch (const dlock::ConnectionError& error) {
      CHECK_MESSAGE(std::string(error.what()).find("check the host and port in the URI") != std::string::npos,
                    error.what());
    }
    CHECK_MESSAGE(log.text().find("reconnected") == std::string::npos, log.text());
    CHECK_NOTHROW((void)dlock::connect(nobody, dlock::ConnectOptions{true}));  // lazy: nothing contacted

    RedisProcess server;
    try {
      (void)dlock::connect(server.uri() + "/999");  // redis-server has 16 databases by default
      FAIL("SELECT of a missing database succeeded");
    } catch (const dlock::BackendError& error) {
      CHECK_MESSAGE(std::string(error.what()).find("check the /db at the end of the URI") != std::string::npos,
                    error.what());
    }
  }

  TEST_CASE("SELECT puts the keys in the configured database") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto backend = dlock::connect(server.uri() + "/3");
    REQUIRE(backend->lock("k", "t", 5000ms).acquired);
    CHECK(client.ok({"EXISTS", "dlock:{k}"}).integer == 0);
    client.ok({"SELECT", "3"});
    CHECK(client.ok({"EXISTS", "dlock:{k}"}).integer == 1);
  }

  TEST_CASE("a WRONGTYPE key gives BackendError, not a wrong answer, and stays as it was") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    client.ok({"HSET", "dlock:{k}", "field", "value"});
    auto backend = dlock::connect(server.uri());
    CHECK_THROWS_WITH_AS((void)backend->lock("k", "t", 5000ms), doctest::Contains("WRONGTYPE"), dlock::BackendError);
    CHECK(client.ok({"HGET", "dlock:{k}", "field"}).str == "value");
    CHECK(client.ok({"PTTL", "dlock:{k}"}).integer == -1);
  }

  TEST_CASE("extendAll renews a whole batch in one command") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto backend = dlock::connect(server.uri());
    std::vector<std::string> tokens;
    for (int i = 0; i < 300; ++i) {
      REQUIRE(backend->lock("k" + std::to_string(i), "t" + std::to_string(i), 5000ms).acquired);
    }
    std::vector<dlock::LeaseRef> leases;
    std::vector<std::string> keys;
    keys.reserve(301);
    tokens.reserve(301);
    for (int i = 0; i < 300; ++i) {
      keys.push_back("k" + std::to_string(i));
      tokens.push_back("t" + std::to_string(i));
    }
    keys.push_back("missing");
    tokens.push_back("t");
    for (std::size_t i = 0; i < keys.size(); ++i) leases.push_back({keys[i], tokens[i]});
    const auto before = client.commandCalls()["evalsha"];
    const auto extended = extendedFlags(backend->extendAll(leases, 60000ms));
    CHECK(client.commandCalls()["evalsha"] - before == 1);
    REQUIRE(extended.size() == 301);
    CHECK(std::count(extended.begin(), extended.end(), true) == 300);
    CHECK_FALSE(extended.back());
    CHECK(client.ok({"PTTL", "dlock:{k299}"}).integer > 5000);
  }
}

TEST_SUITE("SingleOperator") {
  TEST_CASE("a key holding braces keeps its names on one server, whatever the braces") {
    // Names on one server never change between releases: a rolling upgrade keeps excluding.
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto backend = dlock::connect(server.uri());
    for (const std::string key : {"}x", "a}b", "a{b}c", "{}"}) {
      CAPTURE(key);
      const auto taken = backend->lock(key, "token", 5000ms);
      REQUIRE(taken.acquired);
      CHECK(client.ok({"GET", "dlock:{" + key + "}"}).str == "token");
      CHECK(client.ok({"GET", "dlock:{" + key + "}:fence"}).str == std::to_string(taken.fencingToken));
      CHECK(backend->unlock(key, "token").released);
    }
  }
}
