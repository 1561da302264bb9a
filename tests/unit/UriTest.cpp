#include <doctest/doctest.h>

#include <string>

#include "dlock/LockError.h"
#include "dlock/core/Uri.h"

using namespace std::chrono_literals;

namespace {

std::string configErrorOf(const std::string& uri) {
  try {
    (void)dlock::parseUri(uri);
  } catch (const dlock::ConfigError& error) {
    return error.what();
  }
  return "";
}

}  // namespace

TEST_SUITE("Uri") {
  TEST_CASE("redis URIs with credentials, database and options") {
    const auto uri = dlock::parseUri("redis://alice:s3cret@cache.local:6380/2?connect_timeout=250ms&command_timeout=2s&pool_size=8");
    CHECK(uri.scheme == "redis");
    CHECK(uri.user == "alice");
    CHECK(uri.password == "s3cret");
    REQUIRE(uri.hosts.size() == 1);
    CHECK(uri.hosts[0].host == "cache.local");
    CHECK(uri.hosts[0].port == 6380);
    CHECK(uri.db == 2);
    CHECK(uri.duration("connect_timeout", 1s) == 250ms);
    CHECK(uri.duration("command_timeout", 1s) == 2s);
    CHECK(uri.count("pool_size", 4) == 8);
    CHECK(uri.duration("pool_wait", 7ms) == 7ms);
  }

  TEST_CASE("defaults, password-only spelling, percent escapes and IPv6") {
    const auto plain = dlock::parseUri("redis://localhost");
    CHECK(plain.hosts[0].port == 6379);
    CHECK(plain.password.empty());
    CHECK(dlock::parseUri("redis://onlysecret@h:1").password == "onlysecret");
    CHECK(dlock::parseUri("redis://:pw@h:1").password == "pw");
    const auto escaped = dlock::parseUri("redis://us%40er:p%3Ass%40@h:1");
    CHECK(escaped.user == "us@er");
    CHECK(escaped.password == "p:ss@");
    const auto v6 = dlock::parseUri("redis://[::1]:7000");
    CHECK(v6.hosts[0].host == "::1");
    CHECK(v6.hosts[0].port == 7000);
  }

  TEST_CASE("sentinel, cluster, redlock and memory forms") {
    const auto sentinel = dlock::parseUri("redis+sentinel://s1:26379,s2/mymaster/3?sentinel_password=x");
    CHECK(sentinel.hosts.size() == 2);
    CHECK(sentinel.hosts[1].port == 26379);
    CHECK(sentinel.masterName == "mymaster");
    CHECK(sentinel.db == 3);
    const auto cluster = dlock::parseUri("redis+cluster://n1:7000,n2:7001,n3:7002");
    CHECK(cluster.hosts.size() == 3);
    const auto list = dlock::parseUri("redlock://redis://a:1;redis://b:2;redis://c:3");
    CHECK(list.members.size() == 3);
    const auto shorthand = dlock::parseUri("redlock://a:1,b:2,c:3");
    CHECK(shorthand.hosts.size() == 3);
    CHECK(dlock::parseUri("memory://").scheme == "memory");
  }

  TEST_CASE("malformed URIs get a ConfigError naming the problem") {
    CHECK(configErrorOf("").find("empty") != std::string::npos);
    CHECK(configErrorOf("localhost:6379").find("no scheme") != std::string::npos);
    CHECK(configErrorOf("http://h:1").find("unknown scheme 'http'") != std::string::npos);
    CHECK(configErrorOf("redis://").find("no host") != std::string::npos);
    CHECK(configErrorOf("redis://h:0").find("not a number from 1 to 65535") != std::string::npos);
    CHECK(configErrorOf("redis://h:99999").find("'99999'") != std::string::npos);
    CHECK(configErrorOf("redis://h:abc").find("'abc'") != std::string::npos);
    CHECK(configErrorOf("redis://h:").find("port") != std::string::npos);
    CHECK(configErrorOf("redis://h:1/x").find("database 'x'") != std::string::npos);
    CHECK(configErrorOf("redis://a:1,b:2").find("one host") != std::string::npos);
    CHECK(configErrorOf("redis+sentinel://s:1").find("no master name") != std::string::npos);
    CHECK(configErrorOf("redis+cluster://n:1/2").find("only database 0") != std::string::npos);
    CHECK(configErrorOf("redis://h:1?bogus=1").find("unknown option 'bogus'") != std::string::npos);
    CHECK(configErrorOf("redis://h:1?command_timeout=-5").find("command_timeout") != std::string::npos);
    CHECK(configErrorOf("redis://h:1?command_timeout=soon").find("positive duration") != std::string::npos);
    CHECK(configErrorOf("redis://h:1?pool_size=0").find("pool_size") != std::string::npos);
    CHECK(configErrorOf("redis://u:p%zz@h:1").find("%-escape") != std::string::npos);
    CHECK(configErrorOf("redis://[::1:7000").find("unclosed") != std::string::npos);
    CHECK(configErrorOf("memory://x").find("memory://") != std::string::npos);
    CHECK(configErrorOf("redlock://redis://a:1;;redis://b:2").find("empty member") != std::string::npos);
  }

  TEST_CASE("errors and redacted URIs never show a password") {
    const std::string secret = "hunter2-secret";
    for (const std::string& bad : {"redis://alice:" + secret + "@h:0", "redis://alice:" + secret + "@h:1?bogus=1",
                                   "redis://" + secret + "@h:1/notadb", "redis+sentinel://s:1/m?sentinel_password=" + secret + "&bogus=2"}) {
      const std::string what = configErrorOf(bad);
      CHECK_FALSE(what.empty());
      CHECK_MESSAGE(what.find(secret) == std::string::npos, what);
    }
    CHECK(dlock::redactUri("redis://alice:" + secret + "@h:1/0") == "redis://alice:***@h:1/0");
    CHECK(dlock::redactUri("redis://" + secret + "@h:1") == "redis://***@h:1");
    CHECK(dlock::redactUri("redis+sentinel://s:1/m?sentinel_password=" + secret + "&x=1") ==
          "redis+sentinel://s:1/m?sentinel_password=***&x=1");
    CHECK(dlock::redactUri("redis://h:1") == "redis://h:1");
    CHECK(dlock::redactUri("redlock://redis://a:" + secret + "@h:1;redis://h:2;redis://:" + secret + "@h:3") ==
          "redlock://redis://a:***@h:1;redis://h:2;redis://:***@h:3");
    CHECK(configErrorOf("redlock://redis://a:" + secret + "@h:0;redis://h:2").find(secret) == std::string::npos);
    // "://" inside a query value does not make a URI a redlock list (found by fuzzing).
    CHECK(dlock::redactUri("redis+sentinel://:" + secret + "@h1:1/m?sentinel_password=x://y") ==
          "redis+sentinel://:***@h1:1/m?sentinel_password=***");
  }

  TEST_CASE("redactUri masks every password form, list members and sentinel_password") {
    CHECK(dlock::redactUri("redis://127.0.0.1:6379/2") == "redis://127.0.0.1:6379/2");
    CHECK(dlock::redactUri("redis://app:hunter2@10.0.0.5:6379") == "redis://app:***@10.0.0.5:6379");
    CHECK(dlock::redactUri("redis://:hunter2@10.0.0.5:6379") == "redis://:***@10.0.0.5:6379");
    CHECK(dlock::redactUri("redis://hunter2@10.0.0.5:6379/1") == "redis://***@10.0.0.5:6379/1");  // password only
    CHECK(dlock::redactUri("redis+sentinel://u:pw1@h1:26379,h2:26379/mymaster?sentinel_password=pw2&prefix=x") ==
          "redis+sentinel://u:***@h1:26379,h2:26379/mymaster?sentinel_password=***&prefix=x");
    CHECK(dlock::redactUri("redlock://redis://:a1@h1:1;redis://h2:2;redis://b2@h3:3") ==
          "redlock://redis://:***@h1:1;redis://h2:2;redis://***@h3:3");
    CHECK(dlock::redactUri("memory://") == "memory://");
  }
}
