// SPDX-License-Identifier: Apache-2.0
// service_cap — workers on several hosts call one outside service (a payments API) that allows
// at most N calls in flight per client account and throttles the rest (HTTP 429). Every call
// takes a permit of the semaphore `payments-api` first, so however many workers and processes
// run, at most N calls are in flight at once; the rest wait their turn, in order.
//
//   dlock_example_service_cap [--workers 8] [--calls 5] [--permits 4] [--limit 4] [--call-ms 30]
//                             [--name payments-api] --uri redis://HOST:PORT (or DLOCK_URI)
//   dlock_example_service_cap uncapped ...   the same calls without the semaphore
//
// The outside service is simulated in Redis: service:<name>:in-flight counts calls in flight,
// service:<name>:peak keeps the most seen, service:<name>:throttled counts calls over --limit.
// Several processes may run at once against one server: they share the cap. The program checks
// its own calls: all answered, none throttled. Exit: 0 ok, 1 failed check or error, 2 usage.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "../common/AppRedis.h"
#include "../common/StartGate.h"
#include "dlock/dlock.h"

namespace {

using namespace std::chrono_literals;
using examples::AppRedis;
using examples::Reply;

// The outside service's side of a call: counted in flight, throttled over the limit.
constexpr const char* kEnter = R"lua(
local inFlight = redis.call('INCR', KEYS[1])
if inFlight > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], inFlight) end
if inFlight > tonumber(ARGV[1]) then redis.call('INCR', KEYS[3]); return 0 end
return 1
)lua";

struct Service {
  std::string inFlight, peak, throttled;
  explicit Service(const std::string& name)
      : inFlight("service:" + name + ":in-flight"), peak("service:" + name + ":peak"),
        throttled("service:" + name + ":throttled") {}
};

// One call to the outside service: true when it answered, false when it throttled us.
bool callService(AppRedis& redis, const Service& service, int limit, std::chrono::milliseconds callTime) {
  const bool answered =
      redis.command({"EVAL", kEnter, "3", service.inFlight, service.peak, service.throttled, std::to_string(limit)})
          .integer == 1;
  std::this_thread::sleep_for(callTime);  // the request on the wire
  (void)redis.command({"DECR", service.inFlight});
  return answered;
}

struct Tally {
  int answered = 0, throttled = 0, failed = 0;
};

// A worker's calls; each under a permit when `semaphore` is given.
Tally work(const std::string& uri, dlock::Semaphore* semaphore, const Service& service, int calls, int limit,
           std::chrono::milliseconds callTime) {
  Tally tally;
  AppRedis redis(uri);  // one connection per thread: a redisContext is not thread-safe
  for (int i = 0; i < calls; ++i) {
    dlock::PermitLease permit;
    if (semaphore != nullptr) {
      dlock::AcquireOptions wait;
      wait.waitTime = 30s;  // a worker that cannot get a permit in 30 s reports a failed call
      permit = semaphore->acquire(1, wait);
      if (!permit) {
        ++tally.failed;
        continue;
      }
    }
    ++(callService(redis, service, limit, callTime) ? tally.answered : tally.throttled);
    if (permit) permit.release();  // LockLostError if the permit's lease ended during the call
  }
  return tally;
}

int run(const examples::CommandLine& args) {
  const bool capped = args.mode().empty();
  if (!capped && args.mode() != "uncapped") throw examples::UsageError("unexpected argument " + args.mode());
  const int workers = args.number("workers", 8), calls = args.number("calls", 5);
  const int permits = args.number("permits", 4), limit = args.number("limit", 4);
  const auto callTime = std::chrono::milliseconds(args.number("call-ms", 30));
  const std::string name = args.text("name", "payments-api");
  if (workers < 1 || calls < 1) throw examples::UsageError("--workers and --calls must be at least 1");
  const Service service(name);

  // The cap, shared by every process that builds it with this name; the permits are renewed by
  // the watchdog while a call runs, and come back within a lease if a worker's host dies.
  std::shared_ptr<dlock::Semaphore> semaphore;
  if (capped) {
    semaphore = dlock::SemaphoreBuilder()
                    .backend(dlock::connect(args.uri()))
                    .name(name)
                    .permits(static_cast<std::uint32_t>(permits))
                    .build();
  }
  std::vector<Tally> tallies(static_cast<std::size_t>(workers));
  examples::StartGate gate(workers);
  std::vector<std::thread> threads;
  for (auto& tally : tallies) {
    threads.emplace_back([&, out = &tally] {
      gate.arriveAndWait();
      try {
        *out = work(args.uri(), semaphore.get(), service, calls, limit, callTime);
      } catch (const std::exception& error) {
        std::fprintf(stderr, "worker failed: %s\n", error.what());
        out->failed = calls;
      }
    });
  }
  for (auto& thread : threads) thread.join();

  Tally total;
  for (const auto& tally : tallies) {
    total.answered += tally.answered;
    total.throttled += tally.throttled;
    total.failed += tally.failed;
  }
  AppRedis checker(args.uri());
  const Reply peak = checker.command({"GET", service.peak});
  const long long peakSeen = peak.isNil() ? 0 : std::stoll(peak.str);
  const bool ok = total.answered == workers * calls && total.throttled == 0 && total.failed == 0;
  std::printf("%s calls to '%s' (%d workers x %d calls, service limit %d%s): answered %d, throttled %d, failed %d; "
              "most in flight at once (all processes): %lld\n",
              capped ? "capped" : "uncapped", name.c_str(), workers, calls, limit,
              capped ? (", " + std::to_string(permits) + " permits").c_str() : "", total.answered, total.throttled,
              total.failed, peakSeen);
  std::printf("RESULT %s answered=%d throttled=%d failed=%d peak=%lld\n", ok ? "ok" : "FAILED", total.answered,
              total.throttled, total.failed, peakSeen);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(examples::CommandLine(argc, argv));
  } catch (const examples::UsageError& error) {
    std::fprintf(stderr,
                 "dlock_example_service_cap: %s\n"
                 "usage: dlock_example_service_cap [uncapped] [--workers 8] [--calls 5] [--permits 4] [--limit 4]\n"
                 "                                 [--call-ms 30] [--name payments-api]\n"
                 "                                 --uri redis://HOST:PORT (or DLOCK_URI)\n",
                 error.what());
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "dlock_example_service_cap: %s\n", error.what());
    return 1;
  }
}
