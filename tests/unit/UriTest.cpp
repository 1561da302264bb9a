// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>
#include <type_traits>

#include "dlock/LockError.h"
#include "dlock/duration.h"
#include "dlock/uri.h"

using namespace std::chrono_literals;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

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
    const auto list = dlock::parseUri("redlock://redis://a:1;redis://:pw@b:2;redis+cluster://c:3?prefix=p");
    REQUIRE(list.members.size() == 3);
    CHECK(list.members[1].password == "pw");
    // The member before it has no '@': it may be the head of a password holding ";scheme://", so
    // the mask starts in it.
    CHECK(list.members[1].redacted == "***@b:2");
    CHECK(list.members[2].scheme == "redis+cluster");
    CHECK(list.members[2].text("prefix", "") == "p");
    const auto shorthand = dlock::parseUri("redlock://a:1,b:2,c:3");
    CHECK(shorthand.hosts.size() == 3);
    CHECK(dlock::parseUri("memory://").scheme == "memory");
  }

  TEST_CASE("a host without a port means 6379 on every scheme that takes hosts, and 26379 for a sentinel") {
    for (const char* uri : {"redis://h", "rediss://h", "redis+cluster://h,g:7000", "rediss+cluster://h",
                            "redlock://h,g:7000,k"}) {
      CAPTURE(uri);
      CHECK(dlock::parseUri(uri).hosts.front().port == 6379);
    }
    const auto nodes = dlock::parseUri("redlock://h,g:7000,k");
    CHECK(nodes.hosts[1].port == 7000);
    CHECK(nodes.hosts[2].port == 6379);
    const auto members = dlock::parseUri("redlock://redis://a;rediss://b;redis://c:7000");
    REQUIRE(members.members.size() == 3);
    CHECK(members.members[0].hosts.front().port == 6379);
    CHECK(members.members[1].hosts.front().port == 6379);
    for (const char* uri : {"redis+sentinel://s/mymaster", "rediss+sentinel://s,t:26380/mymaster"}) {
      CAPTURE(uri);
      CHECK(dlock::parseUri(uri).hosts.front().port == 26379);
    }
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
    CHECK(configErrorOf("redis://h:1?bogus=1").find("unknown option 'bogus' for redis://") != std::string::npos);
    CHECK(configErrorOf("redis://h:1?command_timeout=-5").find("command_timeout") != std::string::npos);
    CHECK(configErrorOf("redis://h:1?command_timeout=soon").find("positive duration") != std::string::npos);
    CHECK(configErrorOf("redis://h:1?command_timeout=0ms").find("positive duration") != std::string::npos);
    CHECK(configErrorOf("redis://h:1?command_timeout=25h").find("at most a day") != std::string::npos);
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
          "redis+sentinel://s:1/m?sentinel_password=***&x=***");  // an unknown option may be a misspelt secret
    CHECK(dlock::redactUri("redis://h:1") == "redis://h:1");
    CHECK(dlock::redactUri("redlock://redis://a:" + secret + "@h:1;redis://h:2;redis://:" + secret + "@h:3") ==
          "redlock://redis://a:***@h:3");
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
          "redlock://redis://:***@h3:3");
    CHECK(dlock::redactUri("memory://") == "memory://");
  }

  TEST_CASE("each scheme takes its own options: another is a ConfigError naming the option, the scheme and what it takes") {
    // Before, any Redis scheme took every option, and ignored those it had no use for.
    const std::string replicas = configErrorOf("redis://h:6379?wait_replicas=2");
    CHECK_MESSAGE(contains(replicas, "option 'wait_replicas' does not apply to redis://; it takes connect_timeout, "
                                     "command_timeout, pool_size, pool_wait, prefix"), replicas);
    CHECK(contains(configErrorOf("redis+cluster://n:1?sentinel_password=x"),
                   "option 'sentinel_password' does not apply to redis+cluster://"));
    CHECK(contains(configErrorOf("redlock://a:1,b:2,c:3?wait_timeout=1s"), "option 'wait_timeout' does not apply to redlock://"));
    CHECK(contains(configErrorOf("redis://h:1?node_timeout=5ms"), "option 'node_timeout' does not apply to redis://"));
    CHECK(contains(configErrorOf("redis+sentinel://s/m?bogus=1"),
                   "unknown option 'bogus' for redis+sentinel://; it takes connect_timeout, command_timeout, pool_size, "
                   "pool_wait, prefix, fence_ttl, lazy_connect, sentinel_user, sentinel_password, wait_replicas, wait_timeout"));
    const std::string member = configErrorOf("redlock://redis://a:1;redis://b:2?wait_replicas=1");
    CHECK_MESSAGE(contains(member, "member 2: option 'wait_replicas' does not apply to redis:// (a redlock member); it "
                                   "takes connect_timeout, command_timeout, pool_size, pool_wait, prefix, fence_ttl, lazy_connect, node_timeout"),
                  member);

    // What each scheme takes still parses, with its meaning.
    CHECK_NOTHROW((void)dlock::parseUri("redis://h:1?connect_timeout=1s&command_timeout=2s&pool_size=3&pool_wait=4ms&prefix=p:"));
    CHECK_NOTHROW((void)dlock::parseUri("redis+sentinel://s/m?sentinel_user=u&sentinel_password=p&wait_replicas=0&wait_timeout=5ms"));
    CHECK_NOTHROW((void)dlock::parseUri("redis+cluster://n:1?connect_timeout=1m&command_timeout=2s&pool_size=3&pool_wait=4ms&prefix=p"));
    CHECK(dlock::parseUri("redlock://a:1,b:2,c:3?node_timeout=30ms&prefix=p").duration("node_timeout", 1ms) == 30ms);
    const auto list = dlock::parseUri("redlock://redis://a:1?node_timeout=20ms;redis+sentinel://s/m?node_timeout=3s;memory://");
    CHECK(list.members[0].duration("node_timeout", 1ms) == 20ms);
    CHECK(list.members[1].duration("node_timeout", 1ms) == 3s);
  }

  TEST_CASE("uriOptions gives each scheme's options with their type and meaning") {
    const auto names = [](std::string_view scheme) {
      std::vector<std::string> out;
      for (const auto& option : dlock::uriOptions(scheme)) {
        CHECK_FALSE(option.meaning.empty());
        out.emplace_back(option.name);
      }
      return out;
    };
    CHECK(names("redis") ==
          std::vector<std::string>{"connect_timeout", "command_timeout", "pool_size", "pool_wait", "prefix", "fence_ttl", "lazy_connect"});
    CHECK(names("redis+cluster") == names("redis"));
    CHECK(names("redlock").back() == "node_timeout");
    CHECK(names("redis+sentinel").size() == 11);
    CHECK(dlock::parseUri("redis://h:1?lazy_connect=true").flag("lazy_connect", false));
    CHECK_FALSE(dlock::parseUri("redis://h:1?lazy_connect=false").flag("lazy_connect", true));
    CHECK(contains(configErrorOf("redis://h:1?lazy_connect=yes"), "option lazy_connect='yes' is not true or false"));
    CHECK(names("memory").empty());
    CHECK(names("http").empty());
    for (const auto& option : dlock::uriOptions("redis+sentinel")) {
      CHECK((option.type == dlock::UriOptionType::Secret) == (option.name == "sentinel_password"));
    }
  }

  TEST_CASE("a password holding '/', '?', semicolon, '@', ':' or %-escapes appears in no error, not even in part") {
    // Each password is pieces joined by URI syntax; no message may show it, nor any of its pieces.
    struct Case {
      std::string uri;
      std::string password;
    };
    const std::vector<Case> cases = {
        {"redis://:Qz1/Wk2@host:6379", "Qz1/Wk2"},  // the issue's example
        {"redis://user:Qz1/Wk2@host:6379", "Qz1/Wk2"},
        {"redis://Qz1/Wk2@host:6379", "Qz1/Wk2"},
        {"redis://:Qz1?Wk2@host:6379", "Qz1?Wk2"},
        {"redis://:Qz1;Wk2/Vb3@host:6379?bogus=1", "Qz1;Wk2/Vb3"},
        {"redis://us%40er:Qz1@Wk2/Vb3:Xy4@host:0", "Qz1@Wk2/Vb3:Xy4"},
        {"redis://:Qz1%2FWk2%zz@host:1", "Qz1%2FWk2%zz"},
        {"redis+sentinel://:Qz1/Wk2@h1,h2/mymaster", "Qz1/Wk2"},
        {"redis+cluster://:Qz1/Wk2@n1:1,n2:2", "Qz1/Wk2"},
        {"redlock://:Qz1/Wk2@a:1,b:2,c:3", "Qz1/Wk2"},
        {"redlock://redis://:Qz1/Wk2@h1:1;redis://h2:2;redis://h3:3", "Qz1/Wk2"},  // the issue's redlock member
        {"redlock://redis://h1:1;redis://:Qz1;Wk2@h2:2;redis://h3:3", "Qz1;Wk2"},
        {"redis+sentinel://h/m?sentinel_password=Qz1&Wk2&wait_replicas=x", "Qz1&Wk2"},
        {"redis+sentinel://h/m?sentinel_pasword=Qz1Wk2", "Qz1Wk2"},  // misspelt: an unknown option
        {"memory://:Qz1/Wk2@x", "Qz1/Wk2"},
    };
    for (const auto& [uri, password] : cases) {
      CAPTURE(uri);
      const std::string what = configErrorOf(uri);
      const std::string redacted = dlock::redactUri(uri);
      CHECK_MESSAGE(contains(what, "bad URI"), what);
      for (const std::string piece : {"Qz1", "Wk2", "Vb3", "Xy4"}) {
        CHECK_MESSAGE(!contains(what, piece), what);
        CHECK_MESSAGE(!contains(redacted, piece), redacted);
      }
    }
    // The part that failed is not quoted when it may be the password's.
    CHECK(contains(configErrorOf("redis://user:Qz1/Wk2@host:6379"), "the port '***' is not a number"));
    // And the likely cause is named.
    CHECK(contains(configErrorOf("redis://:Qz1/Wk2@host:6379"), "a password's '/', '?' and '@' are written %2F, %3F and %40"));
  }

  TEST_CASE("a sentinel master name holding '@' is refused: it may be a password's tail, which describe() shows") {
    const std::string what = configErrorOf("redis+sentinel://admin:123/Qz1@sentinel:26379");  // password "123/Qz1"
    CHECK(contains(what, "an '@' in the master name"));
    CHECK_FALSE(contains(what, "Qz1"));
  }

  TEST_CASE("redactUri masks a secret option's value up to the next option, and nothing a '@' in it does not hide") {
    // A raw '@' in a query is refused; the text before it may be a password that holds a raw '?'.
    CHECK(dlock::redactUri("redis+sentinel://h1,h2/m?sentinel_password=p@ss&prefix=x") == "redis+sentinel://***&prefix=x");
    CHECK(dlock::redactUri("redis+sentinel://:pw@h1/m?sentinel_password=a&b&wait_replicas=1") ==
          "redis+sentinel://:***@h1/m?sentinel_password=***&wait_replicas=1");
    CHECK(dlock::redactUri("redis://h:1?prefix=team@x") == "redis://h:***@x");  // may be a password: masked
    CHECK(dlock::redactUri("redlock://redis://:a;b@h1:1;redis://h2:2") == "redlock://redis://:***@h1:1;redis://h2:2");
    CHECK(dlock::uriPasswords("redlock://redis://:a;b@h1:1;redis+sentinel://:c@h2/m?sentinel_password=d%26e") ==
          std::vector<std::string>{"a;b", "c", "d%26e"});
  }

  TEST_CASE("a password that swallows URI syntax around it is still masked (found by fuzzing)") {
    // A password holding a raw "?name=" of a secret option, followed by a raw '@' in the query.
    const std::string fake = "rediss+cluster://:://sQz1Wk2/m?sentinel_password=*@n1:1,n2:2?tls_verify=none\xff*@x";
    CHECK_FALSE(contains(dlock::redactUri(fake), "Qz1Wk2"));
    CHECK_FALSE(contains(configErrorOf(fake), "Qz1Wk2"));
    CHECK_FALSE(contains(configErrorOf("redis://:p@hQz1Wk2?sentinel_password=x@y"), "Qz1Wk2"));
    // A password alone, followed by more '@'s: the URI reads "Qz1Wk2@h" as the user.
    CHECK(dlock::redactUri("redis://Qz1Wk2@h:1&x@y") == "redis://***@y");
    // A password ending in a list's syntax: the member after it seems to have an empty one.
    const std::string listed = dlock::redactUri("redlock://redis://u:Qz1;redis://@h:1;redis://h2:2");
    CHECK_MESSAGE(!contains(listed, "Qz1;redis://"), listed);
    CHECK(dlock::redactUri("redlock://redis://@a:1,b:2") == "redlock://***@a:1,b:2");  // the password "redis://"
    // A secret option's value that starts like another option, or like a list member.
    CHECK(dlock::redactUri("redis+sentinel://s/m?sentinel_password=&prefix=Qz1") == "redis+sentinel://s/m?sentinel_password=***");
    CHECK(dlock::redactUri("redis+sentinel://s/m?sentinel_password=;redis://Qz1") == "redis+sentinel://s/m?sentinel_password=***");
    // The value may hold ";redis://", so the members after it are masked with it.
    CHECK(dlock::redactUri("redlock://redis+sentinel://s/m?sentinel_password=Qz1;redis://h:2") ==
          "redlock://redis+sentinel://s/m?sentinel_password=***");
  }

  TEST_CASE("a secret option's value holding semicolon-scheme:// is masked whole, in a list and out of one (found by fuzzing)") {
    // Outside a redlock list there are no members: ";redWk2is://" can only be the password's.
    const std::string single = "redis+sentinel://s1:1/m?sentinel_password=Qz1;redWk2is://&+x";
    CHECK_MESSAGE(!contains(dlock::redactUri(single), "Wk2"), dlock::redactUri(single));
    CHECK_MESSAGE(!contains(configErrorOf(single), "Wk2"), configErrorOf(single));
    const std::string listed = "redlock://redis://a:1;redis+sentinel://s/m?sentinel_password=Qz1;redis://Wk2;redis://b:2";
    CHECK_MESSAGE(!contains(dlock::redactUri(listed), "Wk2"), dlock::redactUri(listed));
  }

  TEST_CASE("a password holding semicolon-scheme:// that splits a redlock list is masked from its head (found by fuzzing)") {
    // The list splits inside the password: its head looks like a member without an '@'.
    const std::string colon = "redlock://redis://:Qz1dlock://x://b:Wk2;req://*@;redis://b:2";
    CHECK_MESSAGE(!contains(dlock::redactUri(colon), "Qz1"), dlock::redactUri(colon));
    CHECK_MESSAGE(!contains(configErrorOf(colon), "Qz1"), configErrorOf(colon));
    const std::string alone = "redlock://redis://Qz1Wk2;x://@h:1;redis://b:2";  // password-only spelling
    CHECK_MESSAGE(!contains(dlock::redactUri(alone), "Qz1"), dlock::redactUri(alone));
    CHECK_MESSAGE(!contains(configErrorOf(alone), "Qz1"), configErrorOf(alone));
  }

  TEST_CASE("a password that starts with '@' and holds semicolon-scheme:// is masked whole, not from its '@' (found by fuzzing)") {
    // "@Qz1/;Wk2x://y" is the password: the list splits inside it, and its first member looked
    // like one with an empty password whose host is "Qz1/".
    const std::string uri = "redlock://redis://:@Qz1/;Wk2x://y@;redis://b:2";
    CHECK_MESSAGE(!contains(dlock::redactUri(uri), "Qz1"), dlock::redactUri(uri));
    CHECK_MESSAGE(!contains(dlock::redactUri(uri), "Wk2"), dlock::redactUri(uri));
    CHECK_MESSAGE(!contains(configErrorOf(uri), "Qz1"), configErrorOf(uri));
    CHECK_MESSAGE(!contains(configErrorOf(uri), "Wk2"), configErrorOf(uri));
    // Two members with credentials: a raw password may run from the first's userinfo to the
    // second's '@', so the whole stretch is masked.
    const std::string two = "redlock://redis://:@Qz1;redis://Wk2@h:3";
    CHECK(dlock::redactUri(two) == "redlock://redis://***@h:3");
  }

  TEST_CASE("a password holding '?' before an '@' is refused, not read as a host that describe() would show") {
    // "Qz1?prefix=Wk2" is the password: without the check the URI named host "Qz1".
    const std::string error = configErrorOf("redis://Qz1?prefix=Wk2@h:1");
    CHECK_MESSAGE(contains(error, "a raw '@' in the query"), error);
    CHECK_MESSAGE(!contains(error, "Qz1"), error);
    CHECK_MESSAGE(!contains(error, "Wk2"), error);
    CHECK(dlock::parseUri("redis://h:1?prefix=a%40b").text("prefix", "") == "a@b");
  }

  TEST_CASE("hosts are dlock::Endpoint, whose address() is host:port") {
    const auto cluster = dlock::parseUri("redis+cluster://n1:7000,n2");
    REQUIRE(cluster.hosts.size() == 2);
    CHECK(cluster.hosts[0].address() == "n1:7000");
    CHECK(cluster.hosts[1].address() == "n2:6379");
    const dlock::Endpoint seed{"s", 26379};
    CHECK(seed.address() == "s:26379");
  }

  TEST_CASE("rediss schemes: TLS options parsed and declared by the TLS schemes only") {
    const auto uri = dlock::parseUri(
        "rediss://user:pw@my-redis.example.com:6380/1?tls_ca_file=/etc/ca.pem&tls_cert_file=/c.pem&tls_key_file=/k.pem"
        "&tls_server_name=redis.internal&tls_verify=full");
    CHECK(uri.scheme == "rediss");
    CHECK(uri.password == "pw");
    CHECK(uri.hosts[0].port == 6380);
    CHECK(uri.db == 1);
    CHECK(uri.text("tls_ca_file", "") == "/etc/ca.pem");
    CHECK(uri.text("tls_server_name", "") == "redis.internal");
    CHECK(dlock::parseUri("rediss://h").hosts[0].port == 6379);
    CHECK(dlock::parseUri("rediss+sentinel://s1,s2:26380/m?tls_ca_dir=/etc/ssl/certs").masterName == "m");
    CHECK(dlock::parseUri("rediss+cluster://n1:7000,n2:7001?tls_verify=none").hosts.size() == 2);
    CHECK(dlock::parseUri("redlock://rediss://a:1?tls_ca_file=/ca;unix:///run/b.sock;redis://c:3").members.size() == 3);

    CHECK(contains(configErrorOf("redis://h:1?tls_ca_file=/ca"), "option 'tls_ca_file' does not apply to redis://"));
    CHECK(contains(configErrorOf("unix:///s?tls_verify=none"), "option 'tls_verify' does not apply to unix://"));
    const std::string options = configErrorOf("rediss://h?bogus=1");
    CHECK_MESSAGE(contains(options, "tls_ca_file, tls_ca_dir, tls_cert_file, tls_key_file, tls_server_name, tls_verify"),
                  options);
    for (const char* scheme : {"rediss", "rediss+sentinel", "rediss+cluster"}) {
      std::vector<std::string> names;
      for (const auto& option : dlock::uriOptions(scheme)) names.emplace_back(option.name);
      CAPTURE(scheme);
      CHECK(std::find(names.begin(), names.end(), "tls_key_file") != names.end());
    }
  }

  TEST_CASE("bad TLS options: a ConfigError naming the field, and never a password") {
    CHECK(contains(configErrorOf("rediss://:pw-x@h?tls_verify=maybe"), "option tls_verify must be full or none"));
    CHECK(contains(configErrorOf("rediss://h?tls_cert_file=/c.pem"), "tls_cert_file and tls_key_file go together"));
    CHECK(contains(configErrorOf("rediss://h?tls_key_file=/k.pem"), "tls_cert_file and tls_key_file go together"));
    CHECK(contains(configErrorOf("rediss://h?tls_ca_file="), "option tls_ca_file is empty"));
    CHECK(contains(configErrorOf("rediss+sentinel://:pw-x@s/m?tls_verify=off"), "tls_verify"));
    CHECK(!contains(configErrorOf("rediss+sentinel://:pw-x@s/m?tls_verify=off"), "pw-x"));
    CHECK(contains(configErrorOf("rediss://h:0"), "not a number from 1 to 65535"));
  }

  TEST_CASE("a host, a socket path or a TLS file holding a byte it cannot is refused, not cut at a NUL (found by fuzzing)") {
    using namespace std::string_literals;
    // getaddrinfo, the kernel and OpenSSL read each up to a NUL: "h<NUL>x" would reach "h".
    CHECK(contains(configErrorOf("redis://good\0.evil:1"s), "a host holds byte 0x00 ('good\\x00.evil')"));
    CHECK(contains(configErrorOf("redis://h\xff:1"s), "a host holds byte 0xff"));
    CHECK(contains(configErrorOf("redis://a:1,b&c:2"), "a host holds '&' ('b&c')"));
    CHECK(contains(configErrorOf("redis+sentinel://s 1:1/m"), "a host holds byte 0x20"));
    CHECK(contains(configErrorOf("redis+cluster://n1:1,n%32:2"), "a host holds '%'"));
    CHECK(contains(configErrorOf("redlock://redis://a:1;redis://b^:2;redis://c:3"), "member 2: a host holds '^'"));
    CHECK(contains(configErrorOf("redis://[fe80::1%25eth0]:1"), "an IPv6 address is hex digits"));
    CHECK(contains(configErrorOf("redis://[::g]:1"), "a host holds 'g'"));
    CHECK(contains(configErrorOf("unix:///run/a%00/b.sock"), "the socket path holds a NUL byte"));
    CHECK(contains(configErrorOf("rediss://h?tls_ca_file=/ca.pem%00x"), "option tls_ca_file holds a NUL byte"));
    CHECK(contains(configErrorOf("rediss://h?tls_server_name=a%00b"), "option tls_server_name holds a NUL byte"));
    // The fuzzer's input: a password given %-escaped whose text the (then accepted) host repeated.
    CHECK(contains(configErrorOf("redis://%41\xff\xff\xff\xff@\xff\xff\xff\xff\xff\xff" "A\xff\xff\xff\xff\x19\0"s),
                   "a host holds byte 0xff"));
    // Messages show such bytes as \xHH: a NUL would cut the message short, a newline forge a log line.
    CHECK(!contains(configErrorOf("redis://%41\xff\xff\xff\xff@\xff" "A\xff\xff\xff\xff"s), "A\xff\xff\xff\xff"));
    CHECK(contains(configErrorOf("redis://h\n:1"s), "bad URI 'redis://h\\x0a:1'"));
    CHECK(dlock::redactUri("redis://:pw@h\r\n1"s) == "redis://:***@h\\x0d\\x0a1");
    // What hosts are: names, IPv4 and IPv6 addresses.
    CHECK(dlock::parseUri("redis://redis-1.internal_zone.example.com:1").hosts[0].host == "redis-1.internal_zone.example.com");
    CHECK(dlock::parseUri("redis://10.0.0.7:1").hosts[0].host == "10.0.0.7");
    CHECK(dlock::parseUri("redis://[2001:db8::7]:1").hosts[0].host == "2001:db8::7");
    CHECK(dlock::parseUri("redis://[::ffff:10.0.0.7]").hosts[0].host == "::ffff:10.0.0.7");
  }

  TEST_CASE("unix:// URIs: an absolute socket path, a password before it, the database as an option") {
    const auto plain = dlock::parseUri("unix:///run/redis/redis.sock");
    CHECK(plain.scheme == "unix");
    CHECK(plain.socketPath == "/run/redis/redis.sock");
    CHECK(plain.hosts.empty());
    CHECK(plain.db == 0);
    const auto full = dlock::parseUri("unix://alice:p%40ss@/tmp/r%20d.sock?db=5&command_timeout=2s");
    CHECK(full.user == "alice");
    CHECK(full.password == "p@ss");
    CHECK(full.socketPath == "/tmp/r d.sock");
    CHECK(full.db == 5);
    CHECK(dlock::parseUri("unix://s3cret@/tmp/r.sock").password == "s3cret");
    CHECK(dlock::redactUri("unix://:s3cret@/tmp/r.sock") == "unix://:***@/tmp/r.sock");

    CHECK(contains(configErrorOf("unix://relative/path.sock"), "unix:// takes an absolute socket path"));
    CHECK(contains(configErrorOf("unix://"), "unix:// takes an absolute socket path"));
    CHECK(contains(configErrorOf("unix://:pw-y@relative"), "absolute socket path"));
    CHECK(!contains(configErrorOf("unix://:pw-y@relative"), "pw-y"));
    CHECK(contains(configErrorOf("unix:///s?db=x"), "option db='x' is not a count"));
    CHECK(contains(configErrorOf("unix:///s?wait_replicas=1"), "option 'wait_replicas' does not apply to unix://"));
  }
  TEST_CASE("a duration without a unit is a ConfigError that names the option and the fix") {
    for (const char* name : {"connect_timeout", "command_timeout", "pool_wait"}) {
      const std::string error = configErrorOf(std::string("redis://h:1?") + name + "=1");
      CHECK_MESSAGE(contains(error, "option " + std::string(name) + "='1': give a unit, e.g. 1s or 500ms"), error);
    }
    CHECK(contains(configErrorOf("redis+sentinel://s/m?wait_timeout=250"), "wait_timeout='250': give a unit"));
    CHECK(contains(configErrorOf("redlock://a:1,b:2,c:3?node_timeout=1.5"), "node_timeout='1.5': give a unit"));
    CHECK(contains(configErrorOf("redlock://redis://a:1?node_timeout=20;redis://b:2;redis://c:3"),
                   "member 1: option node_timeout='20': give a unit"));
  }

  TEST_CASE("durations take us, ms, s, m and h, with a fraction, rounded up to milliseconds") {
    const auto durationOf = [](const std::string& value) {
      return dlock::parseUri("redis://h:1?command_timeout=" + value).duration("command_timeout", 1ms);
    };
    CHECK(durationOf("500ms") == 500ms);
    CHECK(durationOf("2s") == 2s);
    CHECK(durationOf("1m") == 1min);
    CHECK(durationOf("1h") == 1h);
    CHECK(durationOf("1.5s") == 1500ms);
    CHECK(durationOf("2500us") == 3ms);
    CHECK(durationOf("1us") == 1ms);  // never rounded down to zero
    CHECK(durationOf("24h") == 24h);
    CHECK(dlock::parseDuration("10", dlock::BareNumber::Seconds) == 10s);
    CHECK_FALSE(dlock::parseDuration("10", dlock::BareNumber::Refused).has_value());
    for (const char* bad : {"", "s", "1x", "1 s", "-1s", "1.s", "1ss", "ms", "1e3ms"}) {
      CAPTURE(bad);
      CHECK_FALSE(dlock::parseDuration(bad, dlock::BareNumber::Seconds).has_value());
    }
    CHECK_FALSE(dlock::parseDuration("2h", dlock::BareNumber::Refused, 1h).has_value());
  }

  TEST_CASE("percentDecode decodes %XX escapes and refuses a bad or truncated one") {
    CHECK(dlock::percentDecode("a%40b%2Fc%3f") == std::optional<std::string>("a@b/c?"));
    CHECK(dlock::percentDecode("plain") == std::optional<std::string>("plain"));
    CHECK(dlock::percentDecode("%00").value() == std::string(1, '\0'));
    for (const char* bad : {"%", "%4", "a%zz", "%g0"}) {
      CAPTURE(bad);
      CHECK_FALSE(dlock::percentDecode(bad).has_value());
    }
  }
}
