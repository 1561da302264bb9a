// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "ExampleProcess.h"
#include "RedisClient.h"
#include "RedisProcess.h"

using dlock::test::ExampleProcess;
using dlock::test::Finished;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;
using dlock::test::resultField;
using dlock::test::run;

namespace {

const std::string kMarket = DLOCK_EXAMPLE_MARKET;

// What the tests read from Redis themselves, independently of the program's own check.
struct MarketState {
  long long listed = 0;
  long long onSale = 0;
  long long misplaced = 0;   // listed items not in exactly one place (the market or one buyer's inventory)
  long long fundsTotal = 0;
  long long wrongFunds = 0;  // users whose funds differ from what their sales and purchases explain
  long long lockKeysLeft = 0;
};

MarketState readMarket(RedisClient& client, int sellers, int buyers, long long fundsEach) {
  MarketState state;
  std::vector<std::string> users;
  for (int n = 1; n <= sellers; ++n) users.push_back("seller" + std::to_string(n));
  for (int n = 1; n <= buyers; ++n) users.push_back("buyer" + std::to_string(n));
  std::map<std::string, long long> expected;
  for (const auto& user : users) expected[user] = fundsEach;

  const auto listing = client.ok({"HGETALL", "market:listing"}).elements;
  for (std::size_t i = 0; i + 1 < listing.size(); i += 2) {
    const std::string& member = listing[i].str;
    const long long price = std::stoll(listing[i + 1].str);
    const std::string item = member.substr(0, member.rfind('.'));
    const std::string seller = member.substr(member.rfind('.') + 1);
    ++state.listed;
    const bool onSale = !client.ok({"ZSCORE", "market:", member}).isNil();
    int places = onSale ? 1 : 0;
    for (const auto& user : users) {
      if (client.ok({"SISMEMBER", "inventory:" + user, item}).integer == 1) {
        ++places;
        expected[user] -= price;
      }
    }
    if (onSale) ++state.onSale;
    if (!onSale) expected[seller] += price;
    if (places != 1) ++state.misplaced;
    state.lockKeysLeft += client.ok({"EXISTS", "dlock:{market:" + item + "}"}).integer;
  }
  for (const auto& user : users) {
    const long long funds = std::stoll(client.ok({"HGET", "users:" + user, "funds"}).str);
    state.fundsTotal += funds;
    if (funds != expected[user]) ++state.wrongFunds;
  }
  return state;
}

// Seeds, runs one buy process per buyer at once, and returns what each printed.
std::vector<Finished> runBuyers(const std::string& uri, int buyers, const std::string& version) {
  std::vector<ExampleProcess> processes;
  for (int n = 1; n <= buyers; ++n) {
    processes.emplace_back(
        std::vector<std::string>{kMarket, "buy", "--uri", uri, "--buyer", std::to_string(n), "--version", version});
  }
  std::vector<Finished> results;
  for (auto& process : processes) results.push_back(process.wait());
  return results;
}

void racingBuyersKeepTheMarketConsistent(const std::string& version) {
  RedisProcess server;
  RedisClient client(server.host(), server.port());
  // The URI from DLOCK_URI here, from --uri below: both ways are supported.
  const Finished seeded = run({kMarket, "seed", "--sellers", "2", "--buyers", "4", "--items", "40", "--funds", "300"},
                              {{"DLOCK_URI", server.uri()}});
  REQUIRE_MESSAGE(seeded.exitCode == 0, seeded.output);
  CHECK(client.ok({"ZCARD", "market:"}).integer == 40);

  long long purchases = 0;
  for (const auto& buyer : runBuyers(server.uri(), 4, version)) {
    CHECK_MESSAGE(buyer.exitCode == 0, buyer.output);
    CHECK_MESSAGE(buyer.output.find("(" + version + "): purchases=") != std::string::npos, buyer.output);
    const auto at = buyer.output.find("purchases=");
    if (at != std::string::npos) purchases += std::stoll(buyer.output.substr(at + 10));
  }

  const Finished checked = run({kMarket, "check", "--uri", server.uri()});
  CHECK_MESSAGE(checked.exitCode == 0, checked.output);
  CHECK_MESSAGE(checked.output.find("RESULT ok versions=" + version + " ") != std::string::npos, checked.output);
  CHECK(resultField(checked.output, "sold_twice") == 0);
  CHECK(resultField(checked.output, "funds_before") == 1800);
  CHECK(resultField(checked.output, "funds_after") == 1800);
  CHECK(resultField(checked.output, "buyers") == 4);
  CHECK(resultField(checked.output, "purchases") == purchases);
  if (version == "lock") CHECK(resultField(checked.output, "retries") == 0);
  if (version == "optimistic") CHECK(resultField(checked.output, "lock_waits") == 0);

  const MarketState state = readMarket(client, 2, 4, 300);
  CHECK(state.listed == 40);
  CHECK(state.misplaced == 0);
  CHECK(state.fundsTotal == 1800);
  CHECK(state.wrongFunds == 0);
  CHECK(state.lockKeysLeft == 0);
  CHECK(40 - state.onSale == purchases);
  CHECK(resultField(checked.output, "sold") == purchases);
  // 1200 in buyers' funds cannot pay for all 40 listed items (1220 in all): some stay unsold.
  CHECK(state.onSale > 0);
}

}  // namespace

TEST_SUITE("market example") {
  TEST_CASE("four buyer processes with per-item locks sell each item once and conserve funds") {
    racingBuyersKeepTheMarketConsistent("lock");
  }

  TEST_CASE("four optimistic buyer processes sell each item once and conserve funds") {
    racingBuyersKeepTheMarketConsistent("optimistic");
  }

  TEST_CASE("the check fails when an item was sold twice or money appeared") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    REQUIRE(run({kMarket, "seed", "--uri", server.uri(), "--buyers", "2", "--items", "10"}).exitCode == 0);
    for (const auto& buyer : runBuyers(server.uri(), 2, "lock")) REQUIRE_MESSAGE(buyer.exitCode == 0, buyer.output);
    const Finished clean = run({kMarket, "check", "--uri", server.uri()});
    REQUIRE_MESSAGE(clean.exitCode == 0, clean.output);

    SUBCASE("an item in two inventories") {
      auto items = client.ok({"SMEMBERS", "inventory:buyer1"}).elements;
      std::string other = "inventory:buyer2";
      if (items.empty()) {
        items = client.ok({"SMEMBERS", "inventory:buyer2"}).elements;
        other = "inventory:buyer1";
      }
      REQUIRE_FALSE(items.empty());
      client.ok({"SADD", other, items.front().str});
      const Finished checked = run({kMarket, "check", "--uri", server.uri()});
      CHECK(checked.exitCode == 1);
      CHECK_MESSAGE(checked.output.find("RESULT FAILED") != std::string::npos, checked.output);
      CHECK(resultField(checked.output, "sold_twice") == 1);
    }
    SUBCASE("funds that no sale explains") {
      client.ok({"HINCRBY", "users:seller1", "funds", "5"});
      const Finished checked = run({kMarket, "check", "--uri", server.uri()});
      CHECK(checked.exitCode == 1);
      CHECK(resultField(checked.output, "wrong_funds") == 1);
      CHECK(resultField(checked.output, "funds_after") == resultField(checked.output, "funds_before") + 5);
    }
  }

  TEST_CASE("without a URI the market program prints its usage and exits 2") {
    const Finished finished = run({kMarket, "check"}, {{"DLOCK_URI", ""}});
    CHECK(finished.exitCode == 2);
    CHECK_MESSAGE(finished.output.find("no Redis URI") != std::string::npos, finished.output);
  }
}
