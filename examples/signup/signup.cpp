// SPDX-License-Identifier: Apache-2.0
// signup — registration by user name. Several sign-ups of the same name arrive at once (two
// browser tabs, a resubmitted form, a script). The one that takes the lock signup:<name> goes on;
// the others are told at once to try again later; afterwards exactly one account has the name.
//
//   dlock_example_signup register --name NAME [--email E] [--work-ms 300]
//       one sign-up; exit 0 created, 3 name taken, 75 try again later (EX_TEMPFAIL)
//   dlock_example_signup race --name NAME [--users 8] [--work-ms 300]
//       removes NAME's account, signs it up from that many threads at once, checks the outcome
//   dlock_example_signup check --name NAME
//       exit 0 when exactly one account has the name
// Every mode takes --uri redis://HOST:PORT or DLOCK_URI. Exit 1 on a failed check or an error, 2 usage.
//
// Accounts: account:next-id (counter), account:<id> (hash: name, email), account:by-name (hash:
// name -> id). The sign-up checks the name, does slow work, then writes: without the lock, two
// sign-ups would both find the name free and both create an account.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "../common/AppRedis.h"
#include "../common/StartGate.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"

namespace {

using examples::AppRedis;
using examples::Reply;

const std::string kNextId = "account:next-id";
const std::string kByName = "account:by-name";

enum class Outcome { Created, Taken, TryLater };

const char* describe(Outcome outcome) {
  switch (outcome) {
    case Outcome::Created: return "created";
    case Outcome::Taken: return "name taken";
    case Outcome::TryLater: return "being registered by someone else: try again later";
  }
  return "?";
}

Outcome signUp(AppRedis& redis, dlock::ILock& lock, const std::string& name, const std::string& email,
               std::chrono::milliseconds work) {
  const std::string key = "signup:" + name;
  // Try once: a second sign-up of the same name is answered now, not after the first finishes.
  if (!lock.tryLock(key)) return Outcome::TryLater;
  Outcome outcome = Outcome::Taken;
  try {
    if (redis.command({"HEXISTS", kByName, name}).integer == 0) {
      std::this_thread::sleep_for(work);  // validate the e-mail address, hash the password, ...
      const std::string id = std::to_string(redis.command({"INCR", kNextId}).integer);
      const auto replies = redis.pipeline({{"MULTI"},
                                           {"HSET", "account:" + id, "name", name, "email", email},
                                           {"HSET", kByName, name, id},
                                           {"EXEC"}});
      if (replies.back().type != REDIS_REPLY_ARRAY) throw std::runtime_error("sign-up: EXEC failed");
      outcome = Outcome::Created;
    }
  } catch (...) {
    (void)lock.unlockQuietly(key);
    throw;
  }
  lock.unlock(key);  // LockLostError if the lease was lost meanwhile: then the sign-up was unprotected
  return outcome;
}

// The ids of every account with this name (a scan: fine for an example's few accounts).
std::vector<std::string> accountsNamed(AppRedis& redis, const std::string& name) {
  std::vector<std::string> ids;
  const Reply last = redis.command({"GET", kNextId});
  const long long count = last.isNil() ? 0 : std::stoll(last.str);
  for (long long id = 1; id <= count; ++id) {
    const std::string key = "account:" + std::to_string(id);
    if (redis.command({"HGET", key, "name"}).str == name) ids.push_back(std::to_string(id));
  }
  return ids;
}

// `ids`: accountsNamed(redis, name).
int check(AppRedis& redis, const std::string& name, const std::vector<std::string>& ids) {
  const Reply indexed = redis.command({"HGET", kByName, name});
  const bool ok = ids.size() == 1 && indexed.str == ids.front();
  std::printf("accounts named '%s': %zu%s\n", name.c_str(), ids.size(),
              ids.size() == 1 && !ok ? " (but the name index points elsewhere)" : "");
  return ok ? 0 : 1;
}

int race(const std::string& uri, const std::string& name, int users, std::chrono::milliseconds work) {
  if (users < 2) throw examples::UsageError("--users must be at least 2");
  AppRedis redis(uri);
  for (const auto& id : accountsNamed(redis, name)) (void)redis.command({"DEL", "account:" + id});
  (void)redis.command({"HDEL", kByName, name});

  // No fixed lease: the watchdog keeps it while the sign-up's slow steps run.
  const auto lock = dlock::LockBuilder().backend(dlock::connect(uri)).build();
  struct Attempt {
    Outcome outcome = Outcome::TryLater;
    std::string error;
  };
  std::vector<Attempt> attempts(static_cast<std::size_t>(users));
  examples::StartGate gate(users);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < attempts.size(); ++i) {
    threads.emplace_back([&, i] {
      bool arrived = false;
      try {
        AppRedis own(uri);  // one connection per thread: a redisContext is not thread-safe
        gate.arriveAndWait();
        arrived = true;
        attempts[i].outcome = signUp(own, *lock, name, "user" + std::to_string(i) + "@example.org", work);
      } catch (const std::exception& error) {
        attempts[i].error = error.what();
        if (!arrived) gate.arriveAndWait();
      }
    });
  }
  for (auto& thread : threads) thread.join();

  int created = 0, taken = 0, tryLater = 0, failed = 0;
  for (const auto& attempt : attempts) {
    if (!attempt.error.empty()) {
      ++failed;
      std::fprintf(stderr, "sign-up failed: %s\n", attempt.error.c_str());
    } else if (attempt.outcome == Outcome::Created) {
      ++created;
    } else if (attempt.outcome == Outcome::Taken) {
      ++taken;
    } else {
      ++tryLater;
    }
  }
  const auto ids = accountsNamed(redis, name);
  const bool ok = created == 1 && failed == 0 && taken + tryLater == users - 1 && check(redis, name, ids) == 0;
  std::printf("%d sign-ups of '%s' at once: created %d, told to try again later %d, found the name taken %d, "
              "failed %d\n",
              users, name.c_str(), created, tryLater, taken, failed);
  std::printf("RESULT %s users=%d created=%d try_later=%d taken=%d failed=%d accounts=%zu\n", ok ? "ok" : "FAILED",
              users, created, tryLater, taken, failed, ids.size());
  return ok ? 0 : 1;
}

int usage(const char* why) {
  std::fprintf(stderr,
               "dlock_example_signup: %s\n"
               "usage: dlock_example_signup register --name NAME [--email E] [--work-ms 300]\n"
               "       dlock_example_signup race     --name NAME [--users 8] [--work-ms 300]\n"
               "       dlock_example_signup check    --name NAME\n"
               "every mode: --uri redis://HOST:PORT (or DLOCK_URI)\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const examples::CommandLine args(argc, argv);
    const std::string name = args.text("name", "");
    const std::chrono::milliseconds work(args.number("work-ms", 300));
    if (name.empty()) return usage("--name is required");
    if (args.mode() == "register") {
      AppRedis redis(args.uri());
      const auto lock = dlock::LockBuilder().backend(dlock::connect(args.uri())).build();
      const Outcome outcome = signUp(redis, *lock, name, args.text("email", name + "@example.org"), work);
      std::printf("sign-up of '%s': %s\n", name.c_str(), describe(outcome));
      return outcome == Outcome::Created ? 0 : outcome == Outcome::Taken ? 3 : 75;
    }
    if (args.mode() == "race") return race(args.uri(), name, args.number("users", 8), work);
    if (args.mode() == "check") {
      AppRedis redis(args.uri());
      return check(redis, name, accountsNamed(redis, name));
    }
    return usage("no such mode");
  } catch (const examples::UsageError& error) {
    return usage(error.what());
  } catch (const std::exception& error) {
    std::fprintf(stderr, "dlock_example_signup: %s\n", error.what());
    return 1;
  }
}
