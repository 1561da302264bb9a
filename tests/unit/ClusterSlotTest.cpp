// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "dlock/cluster/ClusterKeys.h"

using namespace std::string_literals;

namespace {

// Keys whose braces would move Redis's hash tag, plus ordinary ones.
std::vector<std::string> oddKeys() {
  // clang-format off
  return {"}x", "{", "}", "{}", "}{", "a{b}c", "x}{y", "{{}}", "a}b", "a}c",
          "a}:fence", "a}:released", ":lock:a}", "#0123}", "\0{\r\n}"s, "%s{%n}",
          "{user1000}.following", "{user1000}.followers",
          "plain", "with space", "\0"s, "\r\n", "%s%n"};
  // clang-format on
}

}  // namespace

TEST_SUITE("ClusterSlot") {
  TEST_CASE("CRC16 is the XMODEM variant of the Redis Cluster specification") {
    CHECK(dlock::crc16Xmodem("123456789") == 0x31C3);
    CHECK(dlock::crc16Xmodem("") == 0);
  }

  TEST_CASE("slots follow the specification's hash-tag examples") {
    // The examples of the Redis Cluster specification, "Hash tags".
    CHECK(dlock::keyHashSlot("{user1000}.following") == dlock::keyHashSlot("{user1000}.followers"));
    CHECK(dlock::keyHashSlot("{user1000}.following") == dlock::keyHashSlot("user1000"));
    CHECK(dlock::keyHashSlot("foo{}{bar}") == (dlock::crc16Xmodem("foo{}{bar}") & 16383));
    CHECK(dlock::keyHashSlot("foo{{bar}}zap") == dlock::keyHashSlot("{bar"));
    CHECK(dlock::keyHashSlot("foo{{bar}}zap") == (dlock::crc16Xmodem("{bar") & 16383));
    CHECK(dlock::keyHashSlot("foo{bar}{zap}") == dlock::keyHashSlot("bar"));
    CHECK(dlock::keyHashSlot("{}") == (dlock::crc16Xmodem("{}") & 16383));
    CHECK(dlock::keyHashSlot("no tag}{") == (dlock::crc16Xmodem("no tag}{") & 16383));
    // The CLUSTER KEYSLOT documentation's examples.
    CHECK(dlock::keyHashSlot("somekey") == 11058);
    CHECK(dlock::keyHashSlot("foo{hash_tag}") == 2515);
  }

  TEST_CASE("a key without braces keeps the names of the single-server backend") {
    const auto names = dlock::clusterKeyNames("dlock:", "orders:42");
    CHECK(names.lock == "dlock:{orders:42}");
    CHECK(names.fence == "dlock:{orders:42}:fence");
    CHECK(names.channel == "dlock:{orders:42}:released");
    CHECK(names.slot == dlock::keyHashSlot("orders:42"));
  }

  TEST_CASE("without a derived tag, a key starting with '}' would split the lock from its fence") {
    // The naive `<prefix>{<key>}` of "}x" has an empty tag: Redis hashes each whole name.
    CHECK(dlock::keyHashSlot("dlock:{}x}") != dlock::keyHashSlot("dlock:{}x}:fence"));
    const auto names = dlock::clusterKeyNames("dlock:", "}x");
    CHECK(dlock::keyHashSlot(names.lock) == dlock::keyHashSlot(names.fence));
  }

  TEST_CASE("every key's lock, fence and channel share one slot") {
    for (const auto& key : oddKeys()) {
      CAPTURE(key);
      const auto names = dlock::clusterKeyNames("dlock:", key);
      CHECK(dlock::keyHashSlot(names.lock) == names.slot);
      CHECK(dlock::keyHashSlot(names.fence) == names.slot);
      CHECK(dlock::keyHashSlot(names.channel) == names.slot);
      // The whole key is part of every name.
      CHECK(names.lock.find(key) != std::string::npos);
      CHECK(names.fence.find(key) != std::string::npos);
    }
  }

  TEST_CASE("a key with braces keeps the single-server names on a cluster, so its fencing counter moves with it") {
    const auto names = dlock::clusterKeyNames("dlock:", "a{b}c");
    CHECK(names.lock == "dlock:{a{b}c}");
    CHECK(names.fence == "dlock:{a{b}c}:fence");
    CHECK(names.channel == "dlock:{a{b}c}:released");
    CHECK(dlock::keyHashSlot(names.fence) == names.slot);
    CHECK(names.slot == dlock::keyHashSlot("a{b"));  // Redis's own tag rule: up to the key's first '}'
  }

  TEST_CASE("a key starting with '}' takes a tag derived from all of its bytes, a form no plain name has") {
    const auto names = dlock::clusterKeyNames("dlock:", "}x");
    CHECK(names.lock.rfind("dlock:#{", 0) == 0);  // a plain name has '{' right after the prefix
    CHECK(names.lock.size() == std::string("dlock:#{0123456789abcdef}:lock:}x").size());
    CHECK(names.lock.substr(names.lock.size() - 8) == ":lock:}x");
    std::set<std::uint16_t> slots;
    for (int i = 0; i < 64; ++i) slots.insert(dlock::clusterKeyNames("dlock:", "}" + std::to_string(i)).slot);
    CHECK(slots.size() > 48);  // 64 keys into 16384 slots: a few collisions at most
    CHECK(dlock::clusterKeyNames("dlock:", "}x").lock == names.lock);
  }

  TEST_CASE("a key that spells another key's derived name does not share it") {
    // "#<h>}:lock:}x" named plainly is `dlock:{#<h>}:lock:}x}`; the derived names of "}x" and of
    // "}x}" begin `dlock:#{`, so neither can equal it.
    const auto derived = dlock::clusterKeyNames("dlock:", "}x}");
    const std::string tag = derived.lock.substr(std::string("dlock:#{").size(), 16);
    const auto plain = dlock::clusterKeyNames("dlock:", "#" + tag + "}:lock:}x");
    CHECK(plain.lock != derived.lock);
    CHECK(plain.fence != derived.lock);
    CHECK(plain.lock != derived.fence);
  }

  TEST_CASE("no two keys share a name, whatever their bytes") {
    std::set<std::string> names;
    std::size_t expected = 0;
    for (const auto& key : oddKeys()) {
      const auto n = dlock::clusterKeyNames("dlock:", key);
      names.insert(n.lock);
      names.insert(n.fence);
      names.insert(n.channel);
      expected += 3;
    }
    CHECK(names.size() == expected);
  }

  TEST_CASE("the prefix is part of every name") {
    const auto plain = dlock::clusterKeyNames("app:", "k");
    CHECK(plain.lock == "app:{k}");
    const auto derived = dlock::clusterKeyNames("app:", "}k");
    CHECK(derived.lock.rfind("app:#{", 0) == 0);
    CHECK(derived.slot == dlock::clusterKeyNames("other:", "}k").slot);  // the tag, not the prefix, picks the slot
  }
}
