// SPDX-License-Identifier: Apache-2.0
// market — the market of "Redis in Action", chapter 6: users' funds in hashes (users:<id>, fields
// name and funds), inventories in sets (inventory:<id>), listed items in a sorted set (market:,
// member "<item>.<seller>", score = price). Buyer processes race for the same listed items in one
// of two ways:
//
//   lock        lock market:<item> with dlock, check price and funds, then one MULTI/EXEC moves the
//               money and the item; a buyer that finds the item locked waits for it
//   optimistic  WATCH market: and the buyer, check, MULTI/EXEC; any change to the watched keys
//               (any sale at all, since every sale touches market:) aborts EXEC, and the buyer retries
//
// One program, three modes, run as separate processes against one server:
//   dlock_example_market seed [--sellers 2] [--buyers 4] [--items 40] [--funds 300]
//       fills the market (replacing a previous round)
//   dlock_example_market buy --buyer N --version lock|optimistic [--work-ms 2]
//       one process per buyer, N = 1..buyers, all started together; work-ms stands for the payment
//       step each purchase takes between its check and its commit
//   dlock_example_market check
//       no item sold twice, every sold item in exactly one buyer's inventory, funds conserved
// Every mode takes --uri redis://HOST:PORT or DLOCK_URI. Exit: 0 ok, 1 failed check or error, 2 usage.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../common/AppRedis.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"

namespace {

using namespace std::chrono_literals;
using examples::AppRedis;
using examples::Command;
using examples::Reply;

// Bookkeeping beside the RiA keys: what was seeded and listed (for the check), what the buyers
// report, and the gate that starts all buyers at once.
const std::string kMarket = "market:";
const std::string kSetup = "market:setup";
const std::string kListing = "market:listing";
const std::string kReport = "market:report";
const std::string kVersions = "market:versions";
const std::string kReady = "market:ready";
const std::string kGate = "market:gate";

std::string sellerId(int n) { return "seller" + std::to_string(n); }
std::string buyerId(int n) { return "buyer" + std::to_string(n); }
std::string userKey(const std::string& id) { return "users:" + id; }

// Every user of a market with `sellers` sellers and `buyers` buyers, sellers first.
std::vector<std::string> userIds(int sellers, int buyers) {
  std::vector<std::string> users;
  for (int n = 1; n <= sellers; ++n) users.push_back(sellerId(n));
  for (int n = 1; n <= buyers; ++n) users.push_back(buyerId(n));
  return users;
}
std::string inventoryKey(const std::string& id) { return "inventory:" + id; }

struct Listing {
  std::string member;  // "<item>.<seller>"
  std::string item;
  std::string seller;
  long long price = 0;
};

Listing parseListing(const std::string& member, long long price) {
  const auto dot = member.rfind('.');
  if (dot == std::string::npos) throw std::runtime_error("malformed market member '" + member + "'");
  return {member, member.substr(0, dot), member.substr(dot + 1), price};
}

int seed(AppRedis& redis, int sellers, int buyers, int items, int funds) {
  if (sellers < 1 || buyers < 1 || items < 1) throw examples::UsageError("sellers, buyers and items must be >= 1");
  // Forget a previous round, including users it had and this one has not.
  const int oldSellers = static_cast<int>(redis.hashInt(kSetup, "sellers"));
  const int oldBuyers = static_cast<int>(redis.hashInt(kSetup, "buyers"));
  Command del{"DEL", kMarket, kSetup, kListing, kReport, kVersions, kReady, kGate};
  for (int n = 1; n <= std::max(sellers, oldSellers); ++n) {
    del.push_back(userKey(sellerId(n)));
    del.push_back(inventoryKey(sellerId(n)));
  }
  for (int n = 1; n <= std::max(buyers, oldBuyers); ++n) {
    del.push_back(userKey(buyerId(n)));
    del.push_back(inventoryKey(buyerId(n)));
  }

  std::vector<Command> batch{{"MULTI"}, del};
  const std::vector<std::string> users = userIds(sellers, buyers);
  for (const auto& user : users) batch.push_back({"HSET", userKey(user), "name", user, "funds", std::to_string(funds)});
  Command market{"ZADD", kMarket};
  Command listing{"HSET", kListing};
  for (int i = 1; i <= items; ++i) {
    const std::string item = "Item" + std::to_string(i);
    const std::string member = item + "." + sellerId((i - 1) % sellers + 1);
    const std::string price = std::to_string(10 + (i * 37) % 41);  // 10..50, fixed so runs compare
    market.insert(market.end(), {price, member});
    listing.insert(listing.end(), {member, price});
  }
  batch.push_back(market);
  batch.push_back(listing);
  batch.push_back({"HSET", kSetup, "sellers", std::to_string(sellers), "buyers", std::to_string(buyers), "items",
                   std::to_string(items), "funds_each", std::to_string(funds), "funds_total",
                   std::to_string(static_cast<long long>(funds) * (sellers + buyers))});
  batch.push_back({"EXEC"});
  const Reply exec = redis.pipeline(batch).back();
  if (exec.type != REDIS_REPLY_ARRAY) throw std::runtime_error("seed: EXEC failed: " + exec.str);
  std::printf("seeded %d sellers and %d buyers with %d funds each, %d items listed\n", sellers, buyers, funds, items);
  return 0;
}

// The money and the item move together, or not at all.
std::vector<Command> purchaseTransaction(const std::string& buyer, const Listing& listing) {
  const std::string price = std::to_string(listing.price);
  return {{"MULTI"},
          {"HINCRBY", userKey(listing.seller), "funds", price},
          {"HINCRBY", userKey(buyer), "funds", "-" + price},
          {"SADD", inventoryKey(buyer), listing.item},
          {"ZREM", kMarket, listing.member},
          {"EXEC"}};
}

struct Tally {
  long long purchases = 0, itemGone = 0, noFunds = 0, gaveUp = 0, retries = 0, lockWaits = 0;
};

enum class Outcome { Bought, Gone, NoFunds };

// Reads the price (nil once sold) and the buyer's funds; decides.
Outcome decide(const Reply& price, const Reply& funds, const Listing& listing) {
  if (price.isNil()) return Outcome::Gone;
  if (funds.isNil() || std::stoll(funds.str) < listing.price) return Outcome::NoFunds;
  return Outcome::Bought;
}

void count(Tally& tally, Outcome outcome) {
  if (outcome == Outcome::Gone) ++tally.itemGone;
  if (outcome == Outcome::NoFunds) ++tally.noFunds;
  if (outcome == Outcome::Bought) ++tally.purchases;
}

void checkExec(const Reply& exec) {
  if (exec.type != REDIS_REPLY_ARRAY) throw std::runtime_error("purchase: EXEC did not run: " + exec.str);
  for (const auto& reply : exec.elements) {
    if (reply.isError()) throw std::runtime_error("purchase: " + reply.str);
  }
}

// Per-item lock: only the holder of market:<item> reads or sells that item, so the check and the
// transaction need no WATCH. The buyer's funds change only in this process (sellers never buy),
// so the item lock covers them too.
void buyWithLock(AppRedis& redis, dlock::ILock& lock, const std::string& buyer, const Listing& listing,
                 std::chrono::milliseconds work, Tally& tally) {
  const std::string key = "market:" + listing.item;
  dlock::AcquireOptions tryOnce;
  tryOnce.waitTime = 0ms;
  dlock::Lease lease = lock.acquire(key, tryOnce);
  if (!lease) {
    ++tally.lockWaits;  // another buyer is on this item: wait for its outcome
    dlock::AcquireOptions wait;
    wait.waitTime = 5s;
    lease = lock.acquire(key, wait);
    if (!lease) {
      ++tally.gaveUp;
      return;
    }
  }
  const auto state = redis.pipeline({{"ZSCORE", kMarket, listing.member}, {"HGET", userKey(buyer), "funds"}});
  const Outcome outcome = decide(state[0], state[1], listing);
  if (outcome == Outcome::Bought) {
    std::this_thread::sleep_for(work);  // the payment step; nobody else can sell the item meanwhile
    const Reply exec = redis.pipeline(purchaseTransaction(buyer, listing)).back();
    checkExec(exec);
    if (exec.elements.back().integer != 1) throw std::runtime_error("sold " + listing.member + " twice under its lock");
  }
  // Throws LockLostError if the lease ended before this: then the sale was not protected.
  lease.release();
  count(tally, outcome);
}

// Optimistic: WATCH, read, MULTI/EXEC; a nil EXEC means a watched key changed, so read again.
void buyOptimistic(AppRedis& redis, const std::string& buyer, const Listing& listing, std::chrono::milliseconds work,
                   Tally& tally) {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  for (;;) {
    const auto state = redis.pipeline(
        {{"WATCH", kMarket, userKey(buyer)}, {"ZSCORE", kMarket, listing.member}, {"HGET", userKey(buyer), "funds"}});
    const Outcome outcome = decide(state[1], state[2], listing);
    if (outcome != Outcome::Bought) {
      (void)redis.command({"UNWATCH"});
      count(tally, outcome);
      return;
    }
    std::this_thread::sleep_for(work);  // the payment step; any sale meanwhile makes EXEC fail
    const Reply exec = redis.pipeline(purchaseTransaction(buyer, listing)).back();
    if (!exec.isNil()) {
      checkExec(exec);
      count(tally, outcome);
      return;
    }
    ++tally.retries;
    if (std::chrono::steady_clock::now() >= deadline) {
      ++tally.gaveUp;
      return;
    }
  }
}

// Every buyer checks in; the last one opens the gate for all, so they really race.
void waitForAllBuyers(AppRedis& redis, int buyers) {
  if (redis.command({"INCR", kReady}).integer == buyers) {
    Command open{"RPUSH", kGate};
    for (int n = 0; n < buyers; ++n) open.push_back("go");
    (void)redis.command(open);
  }
  if (redis.command({"BLPOP", kGate, "5"}).isNil()) {
    throw std::runtime_error("not all " + std::to_string(buyers) +
                             " buyers arrived within 5 s (run one buy process per buyer)");
  }
}

int buy(AppRedis& redis, const std::string& uri, int buyerNumber, const std::string& version,
        std::chrono::milliseconds work) {
  if (version != "lock" && version != "optimistic") throw examples::UsageError("--version is lock or optimistic");
  const int buyers = static_cast<int>(redis.hashInt(kSetup, "buyers"));
  if (buyers == 0) throw std::runtime_error("the market is not seeded: run the seed mode first");
  if (buyerNumber < 1 || buyerNumber > buyers) {
    throw examples::UsageError("--buyer is 1.." + std::to_string(buyers));
  }
  const std::string buyer = buyerId(buyerNumber);
  // A fixed lease: a purchase takes milliseconds, so ten seconds is ample and needs no renewal.
  const auto lock = dlock::LockBuilder().backend(dlock::connect(uri)).leaseTime(10s).build();

  // Every buyer hunts bargains: cheapest first (equal prices in random order), so the buyers
  // collide on the same items at the same moment, which is the race both versions must survive.
  std::vector<Listing> wanted;
  const Reply listed = redis.command({"ZRANGE", kMarket, "0", "-1", "WITHSCORES"});
  for (std::size_t i = 0; i + 1 < listed.elements.size(); i += 2) {
    wanted.push_back(parseListing(listed.elements[i].str, std::stoll(listed.elements[i + 1].str)));
  }
  std::shuffle(wanted.begin(), wanted.end(), std::mt19937(std::random_device{}()));
  std::stable_sort(wanted.begin(), wanted.end(),
                   [](const Listing& a, const Listing& b) { return a.price < b.price; });

  waitForAllBuyers(redis, buyers);
  Tally tally;
  for (const auto& listing : wanted) {
    if (version == "lock") {
      buyWithLock(redis, *lock, buyer, listing, work, tally);
    } else {
      buyOptimistic(redis, buyer, listing, work, tally);
    }
  }

  const auto waited = lock->stats().waitTime.count();
  (void)redis.pipeline({{"MULTI"},
                        {"HINCRBY", kReport, "purchases", std::to_string(tally.purchases)},
                        {"HINCRBY", kReport, "item_gone", std::to_string(tally.itemGone)},
                        {"HINCRBY", kReport, "no_funds", std::to_string(tally.noFunds)},
                        {"HINCRBY", kReport, "gave_up", std::to_string(tally.gaveUp)},
                        {"HINCRBY", kReport, "retries", std::to_string(tally.retries)},
                        {"HINCRBY", kReport, "lock_waits", std::to_string(tally.lockWaits)},
                        {"HINCRBY", kReport, "buyers_done", "1"},
                        {"SADD", kVersions, version},
                        {"EXEC"}});
  std::printf("%s (%s): purchases=%lld item_gone=%lld no_funds=%lld lock_waits=%lld retries=%lld gave_up=%lld "
              "waited_ms=%lld\n",
              buyer.c_str(), version.c_str(), tally.purchases, tally.itemGone, tally.noFunds, tally.lockWaits,
              tally.retries, tally.gaveUp, static_cast<long long>(waited));
  return 0;
}

std::map<std::string, std::string> hashOf(AppRedis& redis, const std::string& key) {
  std::map<std::string, std::string> fields;
  const Reply all = redis.command({"HGETALL", key});
  for (std::size_t i = 0; i + 1 < all.elements.size(); i += 2) fields[all.elements[i].str] = all.elements[i + 1].str;
  return fields;
}

long long numberIn(const std::map<std::string, std::string>& fields, const std::string& name) {
  const auto it = fields.find(name);
  return it == fields.end() ? 0 : std::stoll(it->second);
}

// Reads the whole market and checks what the buyers must not break, whatever they reported:
// each listed item is in exactly one place (the market, or one buyer's inventory), each user's
// funds match the sales they took part in, and the total is what was seeded.
int check(AppRedis& redis) {
  const auto setup = hashOf(redis, kSetup);
  if (setup.empty()) throw std::runtime_error("the market is not seeded: run the seed mode first");
  const int sellers = static_cast<int>(numberIn(setup, "sellers"));
  const int buyers = static_cast<int>(numberIn(setup, "buyers"));
  const long long fundsEach = numberIn(setup, "funds_each");
  const long long fundsBefore = numberIn(setup, "funds_total");

  const std::vector<std::string> users = userIds(sellers, buyers);
  std::map<std::string, long long> funds;
  std::map<std::string, std::set<std::string>> inventories;
  for (const auto& user : users) {
    const Reply value = redis.command({"HGET", userKey(user), "funds"});
    funds[user] = value.isNil() ? 0 : std::stoll(value.str);
    for (const auto& item : redis.command({"SMEMBERS", inventoryKey(user)}).elements) {
      inventories[user].insert(item.str);
    }
  }
  std::set<std::string> onSale;
  for (const auto& member : redis.command({"ZRANGE", kMarket, "0", "-1"}).elements) onSale.insert(member.str);

  long long sold = 0, soldTwice = 0, missing = 0, withSeller = 0, unexpected = 0;
  std::map<std::string, long long> expected;
  for (const auto& user : users) expected[user] = fundsEach;
  std::set<std::string> listedItems;
  for (const auto& [member, price] : hashOf(redis, kListing)) {
    const Listing listing = parseListing(member, std::stoll(price));
    listedItems.insert(listing.item);
    long long places = onSale.count(member) != 0 ? 1 : 0;
    for (const auto& [user, items] : inventories) {
      if (items.count(listing.item) == 0) continue;
      ++places;
      if (user.rfind("seller", 0) == 0) {
        ++withSeller;
      } else {
        expected[user] -= listing.price;
      }
    }
    if (places == 0) ++missing;
    if (places > 1) ++soldTwice;
    if (onSale.count(member) == 0 && places > 0) {
      ++sold;
      expected[listing.seller] += listing.price;  // paid once per sale, not per copy
    }
    onSale.erase(member);
  }
  unexpected += static_cast<long long>(onSale.size());  // on sale but never listed
  for (const auto& [user, items] : inventories) {
    for (const auto& item : items) unexpected += listedItems.count(item) == 0 ? 1 : 0;
  }
  long long fundsAfter = 0, wrongFunds = 0, negative = 0;
  for (const auto& user : users) {
    fundsAfter += funds[user];
    wrongFunds += funds[user] != expected[user] ? 1 : 0;
    negative += funds[user] < 0 ? 1 : 0;
  }

  const auto report = hashOf(redis, kReport);
  const long long purchases = numberIn(report, "purchases"), itemGone = numberIn(report, "item_gone");
  const long long noFunds = numberIn(report, "no_funds"), lockWaits = numberIn(report, "lock_waits");
  const long long retries = numberIn(report, "retries"), gaveUp = numberIn(report, "gave_up");
  const long long buyersDone = numberIn(report, "buyers_done");
  std::string versions;
  for (const auto& version : redis.command({"SMEMBERS", kVersions}).elements) {
    versions += (versions.empty() ? "" : "+") + version.str;
  }
  if (versions.empty()) versions = "none";
  const long long misplaced = missing + withSeller + unexpected;
  const bool ok = soldTwice == 0 && misplaced == 0 && wrongFunds == 0 && negative == 0 && fundsAfter == fundsBefore &&
                  purchases == sold && buyersDone == buyers;

  std::printf("market check (%s): %zu items listed, %lld sold, %zu still on sale\n", versions.c_str(),
              listedItems.size(), sold, listedItems.size() - static_cast<std::size_t>(sold));
  std::printf("  items sold twice: %lld; lost: %lld, back with a seller: %lld, unknown: %lld\n", soldTwice, missing,
              withSeller, unexpected);
  std::printf("  funds: %lld before, %lld after; users whose funds do not match their trades: %lld, below zero: %lld\n",
              fundsBefore, fundsAfter, wrongFunds, negative);
  std::printf("  buyers reported: %lld of %d; purchases %lld, item gone %lld, not enough funds %lld, lock waits %lld, "
              "retries %lld, gave up %lld\n",
              buyersDone, buyers, purchases, itemGone, noFunds, lockWaits, retries, gaveUp);
  std::printf("RESULT %s versions=%s items=%zu sold=%lld sold_twice=%lld misplaced=%lld wrong_funds=%lld "
              "funds_before=%lld funds_after=%lld buyers=%lld purchases=%lld item_gone=%lld no_funds=%lld "
              "lock_waits=%lld retries=%lld gave_up=%lld\n",
              ok ? "ok" : "FAILED", versions.c_str(), listedItems.size(), sold, soldTwice, misplaced, wrongFunds,
              fundsBefore, fundsAfter, buyersDone, purchases, itemGone, noFunds, lockWaits, retries, gaveUp);
  return ok ? 0 : 1;
}

int usage(const char* why) {
  std::fprintf(stderr,
               "dlock_example_market: %s\n"
               "usage: dlock_example_market seed  [--sellers 2] [--buyers 4] [--items 40] [--funds 300]\n"
               "       dlock_example_market buy   --buyer N --version lock|optimistic [--work-ms 2]\n"
               "       dlock_example_market check\n"
               "every mode: --uri redis://HOST:PORT (or DLOCK_URI)\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const examples::CommandLine args(argc, argv);
    if (args.mode() != "seed" && args.mode() != "buy" && args.mode() != "check") return usage("no such mode");
    AppRedis redis(args.uri());
    if (args.mode() == "seed") {
      return seed(redis, args.number("sellers", 2), args.number("buyers", 4), args.number("items", 40),
                  args.number("funds", 300));
    }
    if (args.mode() == "buy") {
      return buy(redis, args.uri(), args.number("buyer", 0), args.text("version", ""),
                 std::chrono::milliseconds(args.number("work-ms", 2)));
    }
    return check(redis);
  } catch (const examples::UsageError& error) {
    return usage(error.what());
  } catch (const std::exception& error) {
    std::fprintf(stderr, "dlock_example_market: %s\n", error.what());
    return 1;
  }
}
