// SPDX-License-Identifier: Apache-2.0
// An acquire whose outcome is unknown is cancelled, not merely released: on a busy server the
// acquire may still be queued behind its cleanup (its connection timed out; the cleanup went on
// another), and must not then take the key for a client that gave the token up.
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "RedisClient.h"
#include "RedisProcess.h"
#include "dlock/IOperator.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"

using namespace std::chrono_literals;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;

namespace {

// Passes every call to `inner`, except that the first acquire does not reach the server yet: it
// throws ConnectionError (a timed-out connection), and deliverLateAcquire() sends it afterwards,
// as a busy server would run it after whatever overtook it.
class LateAcquireOperator final : public dlock::IOperator {
 public:
  explicit LateAcquireOperator(std::shared_ptr<dlock::IOperator> inner) : inner_(std::move(inner)) {}

  dlock::AcquireResult lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      if (!held_) {
        held_ = Held{std::string(key), std::string(token), ttl};
        throw dlock::ConnectionError("dlock: lock timed out (held back by the test)");
      }
      tokens_.emplace_back(token);
    }
    return inner_->lock(key, token, ttl);
  }
  dlock::ReleaseResult unlock(std::string_view key, std::string_view token) override { return inner_->unlock(key, token); }
  dlock::ReleaseResult cancel(std::string_view key, std::string_view token) override { return inner_->cancel(key, token); }
  bool extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    return inner_->extend(key, token, ttl);
  }
  std::unique_ptr<dlock::IReleaseWatch> watch(std::string_view key) override { return inner_->watch(key); }
  [[nodiscard]] std::string describe() const override { return inner_->describe(); }

  dlock::AcquireResult deliverLateAcquire() { return inner_->lock(held_->key, held_->token, held_->ttl); }
  [[nodiscard]] std::string heldBackToken() const { return held_->token; }
  [[nodiscard]] std::vector<std::string> laterTokens() const {
    std::lock_guard<std::mutex> guard(mutex_);
    return tokens_;
  }

 private:
  struct Held {
    std::string key;
    std::string token;
    std::chrono::milliseconds ttl;
  };
  const std::shared_ptr<dlock::IOperator> inner_;
  mutable std::mutex mutex_;
  std::optional<Held> held_;         // guarded by mutex_ until set
  std::vector<std::string> tokens_;  // guarded by mutex_
};

}  // namespace

TEST_SUITE("Cancel") {
  TEST_CASE("an acquire that reaches the server after its token was cancelled is refused: no hold nobody owns") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    const auto op = dlock::connect(server.uri());
    CHECK_FALSE(op->cancel("job", "token-1").released);  // nothing held yet: leaves a tombstone

    CHECK_FALSE(op->lock("job", "token-1", 60s).acquired);  // the late acquire
    CHECK(admin.ok({"EXISTS", "dlock:{job}"}).integer == 0);
    // The tombstone lives a short while (the release record's floor), never without a TTL.
    CHECK(admin.ok({"PTTL", "dlock:{job}:released:token-1"}).integer > 0);
    // Other tokens are not affected.
    CHECK(op->lock("job", "token-2", 60s).acquired);
    CHECK(op->unlock("job", "token-2").released);
  }

  TEST_CASE("a cancel that finds the key ours releases it, and a retry of it reports released earlier") {
    RedisProcess server;
    const auto op = dlock::connect(server.uri());
    REQUIRE(op->lock("job", "token-1", 60s).acquired);
    CHECK(op->cancel("job", "token-1").released);
    const dlock::ReleaseResult retried = op->cancel("job", "token-1");
    CHECK(retried.released);
    CHECK(retried.releasedEarlier);
  }

  TEST_CASE("a plain release leaves no tombstone: the same token may acquire again (Redlock retries do)") {
    RedisProcess server;
    const auto op = dlock::connect(server.uri());
    REQUIRE(op->lock("job", "token-1", 60s).acquired);
    REQUIRE(op->unlock("job", "token-1").released);
    CHECK(op->unlock("job", "token-1").releasedEarlier);  // its record says released
    CHECK(op->lock("job", "token-1", 60s).acquired);
    CHECK_FALSE(op->unlock("other", "token-9").released);  // not ours, no cancel: no record either
    CHECK(op->lock("other", "token-9", 60s).acquired);
  }

  TEST_CASE("a wait whose attempt timed out cancels that token and goes on with a new one, and the late acquire is refused") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    const auto late = std::make_shared<LateAcquireOperator>(dlock::connect(server.uri()));
    auto lock = dlock::LockBuilder().backend(late).build();

    REQUIRE(lock->tryLock("job", 10s));  // the first attempt "timed out"; the second acquired
    const std::string abandoned = late->heldBackToken();
    REQUIRE(late->laterTokens().size() == 1);
    CHECK(late->laterTokens().front() != abandoned);

    lock->unlock("job");
    // The first attempt's acquire arrives now: refused, the key stays free.
    CHECK_FALSE(late->deliverLateAcquire().acquired);
    CHECK(admin.ok({"EXISTS", "dlock:{job}"}).integer == 0);
    CHECK(lock->tryLock("job"));
    lock->unlock("job");
  }
}
