// dlock_nemesis_client — one workload process of a fault-testing run. Until --run-ms has passed
// (or SIGTERM), it picks a key, acquires it, does an unfenced read-modify-write of the key's
// counter in the store, a fenced write of its token, and releases; every step is an invoke
// record and a completion record in --history (History.h). Exit 0 at the end; 3 (kHangExitCode)
// when one step outran --hang-ms; 2 on bad arguments.
//
//   dlock_nemesis_client --uri URI --store HOST:PORT --id N --keys k1,k2 --seed S --run-ms T
//       --lease-ms L --acquire-timeout-ms A --history FILE
//       [--hold-ms H] [--hold-max-ms M] [--hang-ms G] [--fixed-lease-ms F]
//
// The hold between the counter's GET and SET is H ms, or drawn from [H, M] with --hold-max-ms.
// --lease-ms is the watchdog's lease; --fixed-lease-ms F acquires with a fixed lease of F instead
// (no renewal), so holds longer than F outlive their lease inside the section.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlock/dlock.h>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <typeinfo>
#include <vector>

#include "Checker.h"
#include "FencedStore.h"
#include "History.h"

namespace {

using namespace std::chrono;
using dlock::nemesis::Kind;
using dlock::nemesis::Op;

struct Args {
  std::string uri;
  std::string store;
  int id = 0;
  std::vector<std::string> keys;
  std::uint64_t seed = 0;
  milliseconds run{10'000};
  milliseconds lease{2'000};
  milliseconds acquireTimeout{1'000};
  milliseconds hold{0};
  milliseconds holdMax{0};
  milliseconds hang{60'000};
  std::optional<milliseconds> fixedLease;
  std::string history;
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "dlock_nemesis_client: %s\nusage: dlock_nemesis_client --uri URI --store HOST:PORT --id N --keys k1,k2 "
               "--seed S --run-ms T --lease-ms L --acquire-timeout-ms A --history FILE [--hold-ms H] [--hold-max-ms M] "
               "[--hang-ms G] "
               "[--fixed-lease-ms F]\n",
               problem.c_str());
  std::exit(2);
}

long long number(const std::string& name, const std::string& text) {
  try {
    std::size_t used = 0;
    const long long value = std::stoll(text, &used);
    if (used == text.size() && value >= 0) return value;
  } catch (const std::logic_error&) {
  }
  usage(name + " wants a number, not '" + text + "'");
}

Args parseArgs(int argc, char** argv) {
  Args args;
  std::map<std::string, std::string> given;
  for (int i = 1; i < argc; i += 2) {
    const std::string name = argv[i];
    if (name.rfind("--", 0) != 0 || i + 1 >= argc) usage("bad argument '" + name + "'");
    given[name] = argv[i + 1];
  }
  const auto take = [&](const char* name, bool required) -> std::optional<std::string> {
    const auto it = given.find(name);
    if (it == given.end()) {
      if (required) usage(std::string(name) + " is required");
      return std::nullopt;
    }
    std::string value = it->second;
    given.erase(it);
    return value;
  };
  args.uri = *take("--uri", true);
  args.store = *take("--store", true);
  args.id = static_cast<int>(number("--id", *take("--id", true)));
  const std::string keys = *take("--keys", true);
  for (std::size_t start = 0; start <= keys.size();) {
    const auto comma = std::min(keys.find(',', start), keys.size());
    if (comma > start) args.keys.push_back(keys.substr(start, comma - start));
    start = comma + 1;
  }
  if (args.keys.empty()) usage("--keys names no key");
  args.seed = static_cast<std::uint64_t>(number("--seed", *take("--seed", true)));
  args.run = milliseconds(number("--run-ms", *take("--run-ms", true)));
  args.lease = milliseconds(number("--lease-ms", *take("--lease-ms", true)));
  args.acquireTimeout = milliseconds(number("--acquire-timeout-ms", *take("--acquire-timeout-ms", true)));
  args.history = *take("--history", true);
  if (auto hold = take("--hold-ms", false)) args.hold = milliseconds(number("--hold-ms", *hold));
  if (auto holdMax = take("--hold-max-ms", false)) args.holdMax = milliseconds(number("--hold-max-ms", *holdMax));
  if (args.holdMax < args.hold) args.holdMax = args.hold;
  if (auto hang = take("--hang-ms", false)) args.hang = milliseconds(number("--hang-ms", *hang));
  if (auto fixed = take("--fixed-lease-ms", false)) args.fixedLease = milliseconds(number("--fixed-lease-ms", *fixed));
  if (!given.empty()) usage("unknown argument '" + given.begin()->first + "'");
  return args;
}

std::atomic<bool> stopping{false};

extern "C" void onTerm(int) { stopping = true; }

// What the hang watchdog watches: when the current step started (0: between steps) and its name.
std::atomic<std::int64_t> stepStartNs{0};
std::atomic<const char*> stepName{""};

struct Outcome {
  Kind kind = Kind::Ok;
  std::string value;
  std::uint64_t token = 0;
};

class Recorder {
 public:
  Recorder(dlock::nemesis::HistoryWriter& writer, std::string process) : writer_(writer), process_(std::move(process)) {}

  void record(Kind kind, const char* op, const std::string& key, std::uint64_t token, std::string value,
              std::string errorType = "", std::string message = "") {
    Op record;
    record.process = process_;
    record.kind = kind;
    record.op = op;
    record.key = key;
    record.token = token;
    record.value = std::move(value);
    record.errorType = std::move(errorType);
    record.message = std::move(message);
    writer_.append(std::move(record));
  }

  // Runs `body` between its invoke record and its completion record. A typed error is recorded by
  // its type's name, anything else as "untyped" (with its typeid) or "unknown"; the run goes on.
  // Returns the outcome, or nothing after an error.
  template <typename Body>
  std::optional<Outcome> step(const char* op, const std::string& key, std::uint64_t token, Body&& body) {
    record(Kind::Invoke, op, key, token, "");
    stepName = op;
    stepStartNs = dlock::nemesis::monotonicNs();
    std::optional<Outcome> outcome;
    const auto failed = [&](const char* type, const std::string& message) {
      record(Kind::Fail, op, key, token, "", type, message);
    };
    try {
      outcome = body();
      record(outcome->kind, op, key, outcome->token != 0 ? outcome->token : token, outcome->value);
    } catch (const dlock::ConnectionError& e) {
      failed("ConnectionError", e.what());
    } catch (const dlock::BackendError& e) {
      failed("BackendError", e.what());
    } catch (const dlock::NotOwnerError& e) {
      failed("NotOwnerError", e.what());
    } catch (const dlock::LockLostError& e) {
      failed("LockLostError", e.what());
    } catch (const dlock::InvalidArgumentError& e) {
      failed("InvalidArgumentError", e.what());
    } catch (const dlock::ConfigError& e) {
      failed("ConfigError", e.what());
    } catch (const dlock::LockError& e) {
      failed("LockError", e.what());
    } catch (const dlock::nemesis::StoreError& e) {
      failed("StoreError", e.what());
    } catch (const std::exception& e) {
      failed("untyped", std::string(typeid(e).name()) + ": " + e.what());
    } catch (...) {
      failed("unknown", "a non-std exception");
    }
    stepStartNs = 0;
    return outcome;
  }

 private:
  dlock::nemesis::HistoryWriter& writer_;
  std::string process_;
};

// Ends the process with kHangExitCode when one step has run longer than `bound`.
void watchForHangs(Recorder& recorder, milliseconds bound, const std::atomic<bool>& done) {
  const auto boundNs = duration_cast<nanoseconds>(bound).count();
  while (!done) {
    std::this_thread::sleep_for(100ms);
    const std::int64_t start = stepStartNs;
    if (start != 0 && dlock::nemesis::monotonicNs() - start > boundNs) {
      recorder.record(Kind::Info, "hang", "", 0, stepName.load(), "", "a step ran longer than the hang bound");
      _exit(dlock::nemesis::kHangExitCode);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parseArgs(argc, argv);
  struct sigaction term {};
  term.sa_handler = onTerm;
  sigemptyset(&term.sa_mask);
  sigaction(SIGTERM, &term, nullptr);

  dlock::nemesis::HistoryWriter writer(args.history);
  Recorder recorder(writer, "c" + std::to_string(args.id));
  std::atomic<bool> done{false};
  std::thread hangWatch(watchForHangs, std::ref(recorder), args.hang, std::cref(done));

  dlock::nemesis::FencedStore store(args.store);
  std::shared_ptr<dlock::ILock> lock;
  (void)recorder.step("setup", "", 0, [&] {
    dlock::LockBuilder builder;
    builder.backend(dlock::connect(args.uri));
    if (args.fixedLease) {
      builder.leaseTime(*args.fixedLease);
    } else {
      builder.watchdogLease(args.lease);
    }
    lock = builder.build();
    lock->onLockLost([&recorder](std::string_view key, std::uint64_t token) {
      recorder.record(Kind::Info, "lost", std::string(key), token, "");
    });
    return Outcome{};
  });
  if (!lock) {
    done = true;
    hangWatch.join();
    return 1;
  }

  std::mt19937_64 random(args.seed * 1000003 + static_cast<std::uint64_t>(args.id));
  std::uniform_int_distribution<std::size_t> pick(0, args.keys.size() - 1);
  std::uniform_int_distribution<long long> holdFor(args.hold.count(), args.holdMax.count());
  const auto end = steady_clock::now() + args.run;
  while (!stopping && steady_clock::now() < end) {
    const std::string& key = args.keys[pick(random)];
    dlock::Lease lease;
    const auto acquired = recorder.step("acquire", key, 0, [&] {
      lease = lock->acquire(key, dlock::AcquireOptions{args.acquireTimeout, std::nullopt});
      if (!lease) return Outcome{Kind::Fail, "timeout", 0};
      return Outcome{Kind::Ok, "", lease.fencingToken()};
    });
    if (!acquired) {
      // An error, not a timeout: a server that refuses connections answers at once, and a loop
      // without a pause would fill the history with tens of thousands of identical failures.
      std::this_thread::sleep_for(10ms);
      continue;
    }
    if (!lease) continue;
    const std::uint64_t token = lease.fencingToken();

    const auto read = recorder.step("read", key, token, [&] { return Outcome{Kind::Ok, std::to_string(store.get(key)), 0}; });
    if (read && !stopping) {
      const milliseconds hold(holdFor(random));
      if (hold.count() > 0) std::this_thread::sleep_for(hold);
      const long long next = std::stoll(read->value) + 1;
      (void)recorder.step("write", key, token, [&] {
        store.set(key, next);
        return Outcome{Kind::Ok, std::to_string(next), 0};
      });
    }
    (void)recorder.step("fenced-write", key, token, [&] {
      return Outcome{Kind::Ok, store.write(key, token) ? "accepted" : "rejected", 0};
    });
    (void)recorder.step("release", key, token, [&] {
      lease.release();
      return Outcome{};
    });
    // A release that failed on the connection leaves the lease, whose destructor tries once more.
    stepName = "release-retry";
    stepStartNs = dlock::nemesis::monotonicNs();
    lease = dlock::Lease();
    stepStartNs = 0;
  }

  // Closing the lock and its connections is watched for hangs like any step.
  stepName = "shutdown";
  stepStartNs = dlock::nemesis::monotonicNs();
  lock.reset();
  stepStartNs = 0;
  done = true;
  hangWatch.join();
  return 0;
}
