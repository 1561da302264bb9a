// SPDX-License-Identifier: Apache-2.0
// dlock_nemesis_client — one workload process of a fault-testing run. Until --run-ms has passed
// (or SIGTERM), it picks a key, acquires it, does an unfenced read-modify-write of the key's
// counter in the store, a fenced write of its token, and releases; every step is an invoke
// record and a completion record in --history (History.h). Exit 0 at the end; 3 (kHangExitCode)
// when one step outran --hang-ms; 2 on bad arguments; 0 after --help.
//
//   dlock_nemesis_client --uri URI --store HOST:PORT --id N --keys k1,k2 --seed S --run-ms T
//       --lease-ms L --acquire-timeout-ms A --history FILE
//       [--hold-ms H] [--hold-max-ms M] [--hang-ms G] [--fixed-lease-ms F] [--fair 1] [--async 1]
//       [--control FILE] [--broken VARIANT] [--primitive lock|rw|sem|cond|elect] [--capacity C]
//
// --async 1 waits with acquireAsync (dlock/async.h) instead of acquire, and cancels one in four of
// the drawn acquires at a moment drawn from their timeout.
// The hold between the counter's GET and SET is H ms, or drawn from [H, M] with --hold-max-ms.
// --fair 1 runs the fair lock (LockBuilder::fair) with a waiter lease of --lease-ms.
// --lease-ms is the watchdog's lease; --fixed-lease-ms F acquires with a fixed lease of F instead
// (no renewal), so holds longer than F outlive their lease inside the section. During a hold the
// client checks isHeld() every few ms and records `invalid` once it is false: when its lease
// ended for it (the checker's "both leases valid" needs it).
//
// --control FILE lets the runner ask for a long hold: when FILE exists, holding "LEASE MAX [WAIT
// [PERMITS [RESIZE]]]" (ms; LEASE 0: the watchdog's; WAIT: the acquire's timeout, else --acquire-timeout-ms;
// PERMITS: a semaphore client's, 0 for every permit; a condition client's role, 1 producer,
// 2 consumer, 0 its own; a read-write client's mode; RESIZE: the capacity a semaphore client
// resizes to after its release, 0 none), the
// next acquisition is of the first key, with that fixed lease;
// once acquired the client renames FILE to FILE.holding, records `hold-start`, and holds until
// the runner removes FILE.holding or MAX ms passed.
// --broken VARIANT runs a deliberately broken lock (BrokenOperator.h; BrokenShared.h for rw, sem;
// BrokenCondition.h for cond).
// --primitive rw or sem runs the ReadWriteLock or Semaphores (capacity C, 3 by default; SharedRecorder.h
// records what they did) instead of the ILock: SharedWorkload below says what each acquisition does.
// --primitive cond runs the bounded buffer (capacity C) on the lock and its Conditions (ConditionRecorder.h
// records what they did): ConditionWorkload below.
// --primitive elect runs for leadership of the first key's election (dlock::Election over
// ElectionRecorder.h) and observes it: ElectionWorkload below.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlock/dlock.h>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <typeinfo>
#include <vector>

#include "BrokenCondition.h"
#include "BrokenOperator.h"
#include "BrokenShared.h"
#include "Checker.h"
#include "ConditionRecorder.h"
#include "ElectionChecks.h"
#include "ElectionRecorder.h"
#include "FencedStore.h"
#include "History.h"
#include "LeaseRecorder.h"
#include "SharedRecorder.h"

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
  bool fair = false;
  bool async = false;
  std::string history;
  std::string control;
  std::string broken;
  std::string primitive = "lock";  // lock, rw, sem, cond, elect
  std::uint32_t capacity = 3;
};

constexpr const char* kUsage =
    "usage: dlock_nemesis_client --uri URI --store HOST:PORT --id N --keys k1,k2 --seed S --run-ms T --lease-ms L "
    "--acquire-timeout-ms A --history FILE [--hold-ms H] [--hold-max-ms M] [--hang-ms G] [--fixed-lease-ms F] [--fair 1] [--async 1] "
    "[--control FILE] [--broken VARIANT (BrokenOperator.h, BrokenShared.h, BrokenCondition.h)] [--primitive lock|rw|sem|cond|elect] [--capacity C]\n"
    "(see the top of tests/nemesis/Client.cpp)\n";

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr, "dlock_nemesis_client: %s\n%s", problem.c_str(), kUsage);
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
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--help") {
      std::printf("%s", kUsage);
      std::exit(0);
    }
  }
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
  if (auto fair = take("--fair", false)) args.fair = number("--fair", *fair) != 0;
  if (auto async = take("--async", false)) args.async = number("--async", *async) != 0;
  if (auto control = take("--control", false)) args.control = *control;
  if (auto primitive = take("--primitive", false)) args.primitive = *primitive;
  if (args.primitive != "lock" && args.primitive != "rw" && args.primitive != "sem" && args.primitive != "cond" &&
      args.primitive != "elect") {
    usage("no primitive '" + args.primitive + "'");
  }
  if (auto capacity = take("--capacity", false)) args.capacity = static_cast<std::uint32_t>(number("--capacity", *capacity));
  if (args.capacity == 0) usage("--capacity wants at least 1");
  if (auto broken = take("--broken", false)) {
    args.broken = *broken;
    // The election's broken variants are patches to the library (library-variants/), none a double.
    if (args.primitive == "elect") usage("no broken variant '" + args.broken + "' for elections");
    const auto& known = args.primitive == "lock"   ? dlock::nemesis::brokenVariants()
                        : args.primitive == "cond" ? dlock::nemesis::brokenConditionVariants()
                                                   : dlock::nemesis::brokenSharedVariants();
    if (std::find(known.begin(), known.end(), args.broken) == known.end()) usage("no broken variant '" + args.broken + "'");
  }
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
  std::string message{};
};

class Recorder {
 public:
  Recorder(dlock::nemesis::HistoryWriter& writer, std::string process) : writer_(writer), process_(std::move(process)) {}

  void record(Kind kind, const char* op, const std::string& key, std::uint64_t token, std::string value,
              std::string errorType = "", std::string message = "", std::int64_t timeNs = 0) {
    Op record;
    record.timeNs = timeNs;
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

  void append(Op op) {
    op.process = process_;
    writer_.append(std::move(op));
  }

  // Runs `body` between its invoke record and its completion record. A typed error is recorded by
  // its type's name, anything else as "untyped" (with its typeid) or "unknown"; the run goes on.
  // Returns the outcome, or nothing after an error. `invokeNs` (0: now) dates the invoke record.
  template <typename Body>
  std::optional<Outcome> step(const char* op, const std::string& key, std::uint64_t token, Body&& body,
                              std::int64_t invokeNs = 0, const std::string& invokeValue = "") {
    record(Kind::Invoke, op, key, token, invokeValue, "", "", invokeNs);
    stepName = op;
    stepStartNs = dlock::nemesis::monotonicNs();
    std::optional<Outcome> outcome;
    const auto failed = [&](const char* type, const std::string& message) {
      record(Kind::Fail, op, key, token, "", type, message);
    };
    try {
      outcome = body();
      record(outcome->kind, op, key, outcome->token != 0 ? outcome->token : token, outcome->value, "", outcome->message);
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

// A long hold the runner asked for through --control: the fixed lease (0: the watchdog's) and
// the longest it may last.
struct HoldRequest {
  milliseconds lease{0};
  milliseconds max{0};
  milliseconds acquireTimeout{0};  // 0: --acquire-timeout-ms
  std::uint32_t permits = 0;        // a semaphore's: 0 for every permit
  std::uint32_t resize = 0;         // a semaphore's capacity to resize to after the release (0: none)
};

std::optional<HoldRequest> pendingRequest(const std::string& control) {
  if (control.empty()) return std::nullopt;
  std::FILE* file = std::fopen(control.c_str(), "r");
  if (file == nullptr) return std::nullopt;
  long long lease = 0;
  long long max = 0;
  long long timeout = 0;
  unsigned permits = 0;
  unsigned resize = 0;
  const int read = std::fscanf(file, "%lld %lld %lld %u %u", &lease, &max, &timeout, &permits, &resize);
  std::fclose(file);
  if (read < 2) return std::nullopt;  // being written: read it next time
  return HoldRequest{milliseconds(lease), milliseconds(max), milliseconds(read >= 3 ? timeout : 0),
                     read >= 4 ? permits : 0, read == 5 ? resize : 0};
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// Takes up the hold the runner asked for: FILE renamed FILE.holding (the runner ends the hold by
// removing it) and `hold-start` recorded. The path the hold watches.
std::string startRequestedHold(Recorder& recorder, const Args& args, const std::string& key, std::uint64_t token,
                               const HoldRequest& request) {
  std::string holding = args.control + ".holding";
  std::rename(args.control.c_str(), holding.c_str());
  recorder.record(Kind::Info, "hold-start", key, token, std::to_string(request.max.count()));
  return holding;
}

// The release step, then the hold dropped: a release that failed leaves it to the hold's
// destructor, which tries once more, watched for hangs like a step.
template <typename Hold>
void releaseAndDrop(Recorder& recorder, const std::string& key, std::uint64_t token, std::unique_ptr<Hold>& hold) {
  (void)recorder.step("release", key, token, [&] {
    hold->release();
    return Outcome{};
  });
  stepName = "release-retry";
  stepStartNs = dlock::nemesis::monotonicNs();
  hold.reset();
  stepStartNs = 0;
}

// Sleeps `length` (or until `holding` is removed), checking every few ms whether the lease
// still holds for its holder and recording `invalid` once it does not. The last look that found
// it held is recorded (value of `invalid`, or of `held` at the end), dated from before that
// look: the checker holds it to the lease's evidence (LeaseRecorder.h).
void holdFor(Recorder& recorder, const Args& args, const std::function<bool()>& isHeld, const std::string& key,
             std::uint64_t token, milliseconds length, const std::string& holding) {
  const auto end = steady_clock::now() + length;
  bool seenInvalid = args.broken == "no-notice";  // that variant never looks
  std::int64_t lastHeldNs = 0;
  while (!stopping && steady_clock::now() < end) {
    if (!holding.empty() && !exists(holding)) break;
    if (!seenInvalid) {
      const std::int64_t lookedNs = dlock::nemesis::monotonicNs();
      if (isHeld()) {
        lastHeldNs = lookedNs;
      } else {
        recorder.record(Kind::Info, "invalid", key, token, std::to_string(lastHeldNs));
        seenInvalid = true;
      }
    }
    std::this_thread::sleep_for(std::min(milliseconds(2), duration_cast<milliseconds>(end - steady_clock::now()) + 1ms));
  }
  if (!seenInvalid && lastHeldNs != 0) recorder.record(Kind::Info, "held", key, token, std::to_string(lastHeldNs));
}

// A writer's section ends: the unfenced write of the value it read + 1, when it read one and the
// lock vouched for the lease at `lookedNs` (as a careful user does: no unprotected write once the
// lease ended for its holder), dated from before that look, for the checker to hold to the
// lease's evidence (LeaseRecorder.h); then the fenced write of `token`, which goes either way for
// the store to refuse.
void writeSection(Recorder& recorder, dlock::nemesis::FencedStore& store, const std::string& key, std::uint64_t token,
                  const std::optional<Outcome>& read, std::int64_t lookedNs) {
  if (read) {
    const long long next = std::stoll(read->value) + 1;
    (void)recorder.step(
        "write", key, token,
        [&] {
          store.set(key, next);
          return Outcome{Kind::Ok, std::to_string(next), 0};
        },
        lookedNs);
  }
  (void)recorder.step("fenced-write", key, token, [&] {
    return Outcome{Kind::Ok, store.write(key, token) ? "accepted" : "rejected", 0};
  });
}

std::shared_ptr<dlock::ILock> buildLock(const Args& args, Recorder& recorder) {
  dlock::LockBuilder builder;
  // The evidence of each lease sits next to the backend, under any broken variant but those
  // that break the server's side (BrokenOperator.h).
  std::shared_ptr<dlock::IOperator> backend = dlock::connect(args.uri);
  const bool operatorVariant = !args.broken.empty() && args.broken != "no-deadline" && args.broken != "no-notice";
  if (operatorVariant && dlock::nemesis::breaksServerSide(args.broken)) {
    backend = std::make_shared<dlock::nemesis::BrokenOperator>(backend, args.broken, args.uri);
  }
  backend = std::make_shared<dlock::nemesis::LeaseRecorder>(backend,
                                                            [&recorder](Op op) { recorder.append(std::move(op)); });
  if (operatorVariant && !dlock::nemesis::breaksServerSide(args.broken)) {
    backend = std::make_shared<dlock::nemesis::BrokenOperator>(backend, args.broken);
  }
  builder.backend(backend);
  if (args.broken == "no-deadline") builder.clock(std::make_shared<dlock::nemesis::SlowClock>(10));
  if (args.fair) builder.fair().waiterLease(args.lease);
  if (args.fixedLease) {
    builder.leaseTime(*args.fixedLease);
  } else {
    builder.watchdogLease(args.lease);
  }
  auto lock = builder.build();
  if (args.broken != "no-notice") {
    lock->onLockLost([&recorder](std::string_view key, std::uint64_t token) {
      recorder.record(Kind::Info, "lost", std::string(key), token, "");
    });
  }
  return lock;
}

// The runner's cancel of a requested acquire (Fleet::requestCancel): while the acquire waits, a
// thread looks every millisecond for the file CONTROL.cancel; once it is there, `cancel` is
// recorded and requested. The destructor stops the look and joins.
class CancelOnRequest {
 public:
  CancelOnRequest(Recorder& recorder, const std::string& control, const std::string& key, dlock::CancelSource cancel)
      : thread_([this, &recorder, path = control + ".cancel", key, cancel]() mutable {
          std::unique_lock<std::mutex> guard(mutex_);
          while (!wake_.wait_for(guard, 1ms, [this] { return done_; })) {
            if (!exists(path)) continue;
            recorder.record(Kind::Info, "cancel", key, 0, "acquire");
            cancel.requestCancel();
            return;
          }
        }) {}
  CancelOnRequest(const CancelOnRequest&) = delete;
  CancelOnRequest& operator=(const CancelOnRequest&) = delete;
  ~CancelOnRequest() {
    {
      const std::lock_guard<std::mutex> guard(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;   // guarded by mutex_
  std::thread thread_;  // last: it uses the members above
};

// One client's loop: acquire, read, hold, write, fenced write, release.
// Runs `action` on its own thread `after` from now unless dismissed first (the destructor
// dismisses and joins): a cancel or a close() at a drawn moment of a wait.
class DrawnMoment {
 public:
  DrawnMoment(milliseconds after, std::function<void()> action)
      : thread_([this, after, action = std::move(action)] {
          std::unique_lock<std::mutex> guard(mutex_);
          if (!wake_.wait_for(guard, after, [this] { return dismissed_; })) action();
        }) {}
  DrawnMoment(const DrawnMoment&) = delete;
  DrawnMoment& operator=(const DrawnMoment&) = delete;
  ~DrawnMoment() {
    {
      const std::lock_guard<std::mutex> guard(mutex_);
      dismissed_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  bool dismissed_ = false;  // guarded by mutex_
  std::thread thread_;      // last: it uses the members above
};

class Workload {
 public:
  Workload(const Args& args, Recorder& recorder, dlock::nemesis::FencedStore& store, dlock::ILock& lock)
      : args_(args), recorder_(recorder), store_(store), lock_(lock),
        random_(args.seed * 1000003 + static_cast<std::uint64_t>(args.id)),
        pick_(0, args.keys.size() - 1), holdFor_(args.hold.count(), args.holdMax.count()),
        cancelAfter_(0, std::max<long long>(1, args.acquireTimeout.count())) {}

  void iteration() {
    const std::optional<HoldRequest> request = pendingRequest(args_.control);
    const std::string& key = request ? args_.keys.front() : args_.keys[pick_(random_)];
    dlock::Lease lease;
    const auto acquired = recorder_.step("acquire", key, 0, [&] {
      std::optional<milliseconds> leaseTime;
      if (request && request->lease.count() > 0) leaseTime = request->lease;
      const milliseconds timeout =
          request && request->acquireTimeout.count() > 0 ? request->acquireTimeout : args_.acquireTimeout;
      // A requested acquire can be cancelled by the runner (a fault on a canceller, WaiterFaults.h).
      dlock::CancelSource cancel;
      std::optional<CancelOnRequest> cancelOnRequest;
      if (request) cancelOnRequest.emplace(recorder_, args_.control, key, cancel);
      const dlock::AcquireOptions options{timeout, leaseTime, cancel.token()};
      if (!args_.async) {
        lease = lock_.acquire(key, options);
      } else {
        // One in four drawn acquires cancelled while pending (or as it completes): InterruptedError.
        std::optional<DrawnMoment> cancelAt;
        if (!request && cancelDraw_(random_) == 0) {
          cancelAt.emplace(milliseconds(cancelAfter_(random_)), [&cancel] { cancel.requestCancel(); });
        }
        lease = lock_.acquireAsync(key, options).get();
      }
      if (!lease) return Outcome{Kind::Fail, "timeout", 0};
      // The owner token, for the checker to match with the server's record (ServerObserver.h).
      return Outcome{Kind::Ok, lease.token(), lease.fencingToken()};
    });
    // An error comes only once the acquire timeout ran out with the backend unreachable (the lock
    // rides out an outage inside its wait), so the next attempt follows at once.
    if (!acquired) return;
    if (!lease) return;
    const std::uint64_t token = lease.fencingToken();
    const std::string holding = request ? startRequestedHold(recorder_, args_, key, token, *request) : std::string();
    const auto read = recorder_.step("read", key, token, [&] { return Outcome{Kind::Ok, std::to_string(store_.get(key)), 0}; });
    bool held = false;
    std::int64_t lookedNs = 0;
    if (read && !stopping) {
      holdFor(recorder_, args_, [&lease] { return lease.isHeld(); }, key, token,
              request ? request->max : milliseconds(holdFor_(random_)), holding);
      lookedNs = dlock::nemesis::monotonicNs();
      held = args_.broken == "no-notice" || lease.isHeld();  // that variant does not look
    }
    writeSection(recorder_, store_, key, token, held ? read : std::nullopt, lookedNs);
    release(lease, key, token);
  }

 private:
  void release(dlock::Lease& lease, const std::string& key, std::uint64_t token) {
    (void)recorder_.step("release", key, token, [&] {
      try {
        lease.release();
      } catch (const dlock::LockLostError&) {
        if (args_.broken != "no-notice") throw;  // that variant swallows it: "released"
      }
      return Outcome{};
    });
    // A release that failed on the connection leaves the lease, whose destructor tries once more.
    stepName = "release-retry";
    stepStartNs = dlock::nemesis::monotonicNs();
    lease = dlock::Lease();
    stepStartNs = 0;
  }

  const Args& args_;
  Recorder& recorder_;
  dlock::nemesis::FencedStore& store_;
  dlock::ILock& lock_;
  std::mt19937_64 random_;
  std::uniform_int_distribution<std::size_t> pick_;
  std::uniform_int_distribution<long long> holdFor_;
  std::uniform_int_distribution<int> cancelDraw_{0, 3};
  std::uniform_int_distribution<long long> cancelAfter_;
};

// A --control request's PERMITS field for a read-write client: the requested hold's mode; a read
// that asks tryUpgrade once its section ends (the runner ends it beside another reader), a write
// that downgrades once its section ends (the runner ends it with a writer waiting).
constexpr std::uint32_t kRequestWrite = 0;
[[maybe_unused]] constexpr std::uint32_t kRequestRead = 1;  // any PERMITS but the others: named for the protocol
constexpr std::uint32_t kRequestUpgrade = 2;
constexpr std::uint32_t kRequestDowngrade = 3;

// The public classes of a read-write or semaphore client: LockBuilder::buildReadWrite, or one
// Semaphore per key (SemaphoreBuilder: name = the key, capacity --capacity), renewed by the
// watchdog (--lease-ms), a waiter's place as long; over the recorder (SharedRecorder.h) over the
// backend's operators, with broken doubles in between for the shared variants (BrokenShared.h).
class SharedClasses {
 public:
  SharedClasses(const Args& args, Recorder& recorder) : args_(args), recorder_(recorder) {
    std::shared_ptr<dlock::IOperator> backend = dlock::connect(args.uri);
    auto readWrite = std::dynamic_pointer_cast<dlock::IReadWriteOperator>(backend);
    auto semaphore = std::dynamic_pointer_cast<dlock::ISemaphoreOperator>(backend);
    if (!args.broken.empty()) {
      if (readWrite) readWrite = dlock::nemesis::brokenReadWrite(readWrite, args.broken, args.uri);
      if (semaphore) semaphore = dlock::nemesis::brokenSemaphore(semaphore, args.broken, args.uri);
    }
    backend_ = std::make_shared<dlock::nemesis::SharedRecorder>(
        backend, readWrite, semaphore, [&recorder](Op op) { recorder.append(std::move(op)); });
    if (args.primitive == "rw") {
      dlock::LockBuilder builder;
      builder.backend(backend_).watchdogLease(args.lease).waiterLease(args.lease);
      readWrite_ = builder.buildReadWrite();
      readWrite_->writeLock()->onLockLost(lostRecorder());  // the two sides share it
    }
  }

  [[nodiscard]] dlock::ReadWriteLock& readWrite() const { return *readWrite_; }
  [[nodiscard]] dlock::Semaphore& semaphore(const std::string& key) {
    std::shared_ptr<dlock::Semaphore>& semaphore = semaphores_[key];
    if (!semaphore) semaphore = buildSemaphore(key, args_.capacity);
    return *semaphore;
  }
  // After another client resized the semaphore (an acquire's ConfigError), built again with the
  // capacity the backend stores, as a user whose configuration went stale does.
  void rebuildSemaphore(const std::string& key) {
    const std::uint32_t stored = semaphore(key).inspect().capacity;
    semaphores_[key] = buildSemaphore(key, stored != 0 ? stored : args_.capacity);
  }

 private:
  [[nodiscard]] std::shared_ptr<dlock::Semaphore> buildSemaphore(const std::string& key, std::uint32_t capacity) {
    dlock::SemaphoreBuilder builder;
    builder.backend(backend_).name(key).permits(capacity).watchdogLease(args_.lease).waiterLease(args_.lease);
    std::shared_ptr<dlock::Semaphore> semaphore = builder.build();
    semaphore->onPermitsLost(lostRecorder());
    return semaphore;
  }

  [[nodiscard]] std::function<void(std::string_view, std::uint64_t)> lostRecorder() const {
    return [&recorder = recorder_](std::string_view key, std::uint64_t token) {
      recorder.record(Kind::Info, "lost", std::string(key), token, "");
    };
  }

  const Args& args_;
  Recorder& recorder_;
  std::shared_ptr<dlock::nemesis::SharedRecorder> backend_;
  std::shared_ptr<dlock::ReadWriteLock> readWrite_;
  std::map<std::string, std::shared_ptr<dlock::Semaphore>> semaphores_;
};

// What one shared hold is, for the loop below: the mode, the permits, and its look.
struct SharedAsk {
  bool write = false;
  bool permits = false;  // a semaphore's
  std::uint32_t count = 1;
  [[nodiscard]] std::string modeRecord() const {
    return std::string(permits ? "permits" : write ? "write" : "read") + " " + std::to_string(count);
  }
};

// One read-write or semaphore client's loop over the public classes: acquire a read
// (ReadWriteLock::readLock()->tryLock), a write (writeLock()->tryLock) or permits
// (Semaphore::acquire → PermitLease), enter the section in the store's act log, act (a writer: the
// unfenced read-modify-write and the fenced write; a reader: a read of the fenced register; a
// permit holder: nothing but the tally), exit, release. Drawn from the seed (never in a hold the
// nemesis asked for): a writer's hold downgraded after its section (the read lock taken, the
// write unlocked), held a while as a reader that reads the register (a writer let in between
// shows a token above its own); a reader's hold offered tryUpgrade after its section, doing the
// unfenced read-modify-write once upgraded; a permit holder's fixed lease (PermitLease::extend
// before its section) instead of the watchdog's; Semaphore::resize to the capacity it has after
// a release; a CancelSource cancelling an acquire at a moment inside its wait. A hold the nemesis
// asks for (--control) is a write, or a read when its PERMITS field is kRequestRead (rw); every
// permit, or PERMITS of them (sem).
class SharedWorkload {
 public:
  SharedWorkload(const Args& args, Recorder& recorder, dlock::nemesis::FencedStore& store, SharedClasses& classes)
      : args_(args), recorder_(recorder), store_(store), classes_(classes),
        random_(args.seed * 1000003 + static_cast<std::uint64_t>(args.id)), pick_(0, args.keys.size() - 1),
        holdFor_(args.hold.count(), args.holdMax.count()) {}

  void iteration() {
    const std::optional<HoldRequest> request = pendingRequest(args_.control);
    const std::string& key = request ? args_.keys.front() : args_.keys[pick_(random_)];
    SharedAsk ask;
    ask.permits = args_.primitive == "sem";
    ask.write = !ask.permits && (request ? request->permits == kRequestWrite || request->permits == kRequestDowngrade
                                         : random_() % 3 == 0);
    // One permit, or a third of the time every permit (the capacity the semaphore has now): a
    // release of those admits several waiters.
    const std::uint32_t capacity = ask.permits ? classes_.semaphore(key).capacity() : 1;
    ask.count = !ask.permits ? 1
                : request   ? std::min(request->permits > 0 ? request->permits : capacity, capacity)
                            : (random_() % 3 == 0 ? capacity : 1);
    const milliseconds timeout =
        request && request->acquireTimeout.count() > 0 ? request->acquireTimeout : args_.acquireTimeout;
    std::optional<milliseconds> fixedLease;
    if (request && request->lease.count() > 0) fixedLease = request->lease;
    if (!request && ask.permits && random_() % 4 == 0) fixedLease = args_.lease;  // extended below
    // 0: downgrade a write, upgrade a read
    const bool changesMode = request && !ask.permits &&
                             (request->permits == kRequestUpgrade || request->permits == kRequestDowngrade);
    const std::uint64_t extra = request ? (changesMode ? 0 : 99) : random_() % 4;
    if (ask.permits) {
      permitsRound(key, ask, timeout, fixedLease, request);
    } else {
      readWriteRound(key, ask, timeout, fixedLease, request, extra == 0);
    }
  }

 private:
  // A cancel at a drawn moment of the acquire's wait, one time in eight (never for the nemesis's
  // holds), into `moment`.
  void maybeCancel(const std::string& key, milliseconds timeout, bool requested, dlock::CancelSource& cancel,
                   std::optional<DrawnMoment>& moment) {
    if (requested || random_() % 8 != 0) return;
    const milliseconds at(std::uniform_int_distribution<long long>(0, timeout.count())(random_));
    moment.emplace(at, [this, cancel, key]() mutable {
      recorder_.record(Kind::Info, "cancel", key, 0, "acquire");
      cancel.requestCancel();
    });
  }

  void readWriteRound(const std::string& key, const SharedAsk& ask, milliseconds timeout,
                      std::optional<milliseconds> fixedLease, const std::optional<HoldRequest>& request, bool extra) {
    dlock::ReadWriteLock& rw = classes_.readWrite();
    dlock::ILock& side = ask.write ? *rw.writeLock() : *rw.readLock();
    dlock::CancelSource cancel;
    const auto acquired = recorder_.step("acquire", key, 0, [&] {
      std::optional<DrawnMoment> moment;
      maybeCancel(key, timeout, request.has_value(), cancel, moment);
      const bool taken = fixedLease ? side.tryLock(key, timeout, *fixedLease) : side.tryLock(key, timeout, cancel.token());
      if (!taken) return Outcome{Kind::Fail, "timeout", 0};
      return Outcome{Kind::Ok, dlock::nemesis::SharedRecorder::lastOwner(key), side.fencingToken(key)};
    });
    if (!acquired || acquired->kind != Kind::Ok) return;
    const std::uint64_t token = acquired->token;
    const std::string owner = acquired->value;
    // What the checker replays the act log with: the hold's mode and permits, by owner token.
    recorder_.record(Kind::Info, "mode", key, token, ask.modeRecord(), "", owner);
    const std::string holding = request ? startRequestedHold(recorder_, args_, key, token, *request) : std::string();
    const milliseconds length = request ? request->max : milliseconds(holdFor_(random_));
    const auto isHeld = [&] { return side.isHeld(key); };
    if (section(key, token, owner, ask, isHeld, length, holding) && extra && !stopping) {
      if (ask.write) {
        downgraded(key, token, owner);
      } else {
        upgraded(key, token, owner);
      }
    }
    (void)recorder_.step("release", key, token, [&] {
      while (rw.writeLock()->holdCount(key) > 0) rw.writeLock()->unlock(key);  // an upgrade's: back to the read
      while (rw.readLock()->holdCount(key) > 0) rw.readLock()->unlock(key);
      return Outcome{};
    });
    dropQuietly(*rw.writeLock(), key);
    dropQuietly(*rw.readLock(), key);
  }

  // A release that failed on the connection keeps the hold: dropped quietly, its lease ends on its own.
  static void dropQuietly(dlock::ILock& side, const std::string& key) {
    stepName = "release-retry";
    stepStartNs = dlock::nemesis::monotonicNs();
    while (side.holdCount(key) > 0) (void)side.unlockQuietly(key);
    stepStartNs = 0;
  }

  // The writer takes the read lock and unlocks the write (a downgrade), then, from the
  // downgrade's return, a read section of its own in the act log: it holds and reads the
  // register (a writer let in meanwhile is judged beside it, and wrote a token above this hold's).
  void downgraded(const std::string& key, std::uint64_t token, const std::string& owner) {
    dlock::ReadWriteLock& rw = classes_.readWrite();
    const auto done = recorder_.step("downgrade", key, token, [&] {
      if (!rw.readLock()->tryLock(key)) return Outcome{Kind::Fail, "refused", 0};
      rw.writeLock()->unlock(key);
      return Outcome{};
    });
    if (!done || done->kind != Kind::Ok) return;
    SharedAsk read;
    recorder_.record(Kind::Info, "mode", key, token, read.modeRecord(), "", owner);
    (void)section(key, token, owner, read, [&] { return rw.readLock()->isHeld(key); },
                  milliseconds(holdFor_(random_)), "");
  }

  // The reader asks tryUpgrade; once the write is its own, from the upgrade's return, a write
  // section of its own in the act log (a reader or writer admitted beside it is judged) with the
  // unfenced read-modify-write (a second writer beside it loses an update: check 2).
  void upgraded(const std::string& key, std::uint64_t token, const std::string& owner) {
    dlock::ReadWriteLock& rw = classes_.readWrite();
    const auto up = recorder_.step("upgrade", key, token, [&] {
      return Outcome{Kind::Ok, rw.tryUpgrade(key) ? "upgraded" : "refused", 0};
    });
    if (!up || up->value != "upgraded") return;
    SharedAsk write;
    write.write = true;
    recorder_.record(Kind::Info, "mode", key, token, write.modeRecord(), "", owner);
    const auto isHeld = [&] { return rw.writeLock()->isHeld(key); };
    const auto entered = isHeld() ? recorder_.step("enter", key, token, [&] {
      return Outcome{Kind::Ok, std::to_string(store_.act(key, true, owner, 1)), 0};
    })
                                  : std::nullopt;
    if (!entered) return;
    const auto read = recorder_.step("read", key, token, [&] { return Outcome{Kind::Ok, std::to_string(store_.get(key)), 0}; });
    if (read && !stopping) holdFor(recorder_, args_, isHeld, key, token, milliseconds(holdFor_(random_)), "");
    const std::int64_t lookedNs = dlock::nemesis::monotonicNs();
    if (read && isHeld()) {
      const long long next = std::stoll(read->value) + 1;
      (void)recorder_.step(
          "write", key, token,
          [&] {
            store_.set(key, next);
            return Outcome{Kind::Ok, std::to_string(next), 0};
          },
          lookedNs);
    }
    (void)recorder_.step("exit", key, token, [&] {
      return Outcome{Kind::Ok, std::to_string(store_.act(key, false, owner, 1)), 0};
    });
  }

  void permitsRound(const std::string& key, const SharedAsk& ask, milliseconds timeout,
                    std::optional<milliseconds> fixedLease, const std::optional<HoldRequest>& request) {
    dlock::Semaphore& semaphore = classes_.semaphore(key);
    dlock::PermitLease permits;
    dlock::CancelSource cancel;
    bool resized = false;  // by another client: this object's capacity is stale
    const auto acquired = recorder_.step("acquire", key, 0, [&] {
      std::optional<DrawnMoment> moment;
      maybeCancel(key, timeout, request.has_value(), cancel, moment);
      try {
        permits = semaphore.acquire(ask.count, dlock::AcquireOptions{timeout, fixedLease, cancel.token()});
      } catch (const dlock::ConfigError&) {
        resized = true;
        return Outcome{Kind::Fail, "resized", 0};
      }
      if (!permits) return Outcome{Kind::Fail, "timeout", 0};
      return Outcome{Kind::Ok, permits.token(), permits.fencingToken()};
    });
    if (resized) classes_.rebuildSemaphore(key);
    if (!acquired || acquired->kind != Kind::Ok) return;
    const std::uint64_t token = acquired->token;
    recorder_.record(Kind::Info, "mode", key, token, ask.modeRecord(), "", acquired->value);
    const std::string holding = request ? startRequestedHold(recorder_, args_, key, token, *request) : std::string();
    if (!request && fixedLease) {  // a fixed lease moved on once, as a user extends a long job's
      (void)recorder_.step("extend", key, token, [&] {
        permits.extend(*fixedLease);
        return Outcome{};
      });
    }
    const milliseconds length = request ? request->max : milliseconds(holdFor_(random_));
    (void)section(key, token, acquired->value, ask, [&] { return permits.isHeld(); }, length, holding);
    (void)recorder_.step("release", key, token, [&] {
      permits.release();
      return Outcome{};
    });
    stepName = "release-retry";
    stepStartNs = dlock::nemesis::monotonicNs();
    permits = dlock::PermitLease();
    stepStartNs = 0;
    const bool asked = request && request->resize > 0;
    if (asked || (!request && random_() % 16 == 0)) {  // to 2, 3 or 4: the checks count against the one in force
      const std::uint32_t to = asked ? request->resize : 2 + static_cast<std::uint32_t>(random_() % 3);
      (void)recorder_.step(
          "resize", key, 0, [&] { return Outcome{Kind::Ok, std::to_string(semaphore.resize(to)), 0}; }, 0,
          std::to_string(to));
    }
  }

  // Enter, act, exit; true when it entered and acted.
  bool section(const std::string& key, std::uint64_t token, const std::string& owner, const SharedAsk& ask,
               const std::function<bool()>& isHeld, milliseconds length, const std::string& holding) {
    const auto entered = isHeld() ? recorder_.step("enter", key, token, [&] {
      return Outcome{Kind::Ok, std::to_string(store_.act(key, true, owner, ask.count)), 0};
    })
                                  : std::nullopt;
    if (!entered) return false;
    if (!stopping) act(isHeld, ask, key, token, length, holding);
    (void)recorder_.step("exit", key, token, [&] {
      return Outcome{Kind::Ok, std::to_string(store_.act(key, false, owner, ask.count)), 0};
    });
    return true;
  }

  // Inside the section, as a careful user acts: nothing unprotected once the hold ended for its
  // holder (the fenced write still goes, for the store to refuse). Writes and reads are dated
  // from before the look that allowed them.
  void act(const std::function<bool()>& isHeld, const SharedAsk& ask, const std::string& key, std::uint64_t token,
           milliseconds length, const std::string& holding) {
    if (!ask.write) {
      holdFor(recorder_, args_, isHeld, key, token, length, holding);
      if (!ask.permits && !stopping && isHeld()) {
        (void)recorder_.step("read-fence", key, token,
                             [&] { return Outcome{Kind::Ok, std::to_string(store_.lastToken(key)), 0}; });
      }
      return;
    }
    const auto read = recorder_.step("read", key, token, [&] { return Outcome{Kind::Ok, std::to_string(store_.get(key)), 0}; });
    bool held = false;
    std::int64_t lookedNs = 0;
    if (read && !stopping) {
      holdFor(recorder_, args_, isHeld, key, token, length, holding);
      lookedNs = dlock::nemesis::monotonicNs();
      held = isHeld();
    }
    writeSection(recorder_, store_, key, token, held ? read : std::nullopt, lookedNs);
  }

  const Args& args_;
  Recorder& recorder_;
  dlock::nemesis::FencedStore& store_;
  SharedClasses& classes_;
  std::mt19937_64 random_;
  std::uniform_int_distribution<std::size_t> pick_;
  std::uniform_int_distribution<long long> holdFor_;
};

// The bounded buffer's lock: LockBuilder's default lock, or its fair lock with --fair 1, renewed
// by the watchdog (--lease-ms), a waiter's place on a condition lasting two leases; over the
// condition recorder (ConditionRecorder.h) over the lease evidence (LeaseRecorder.h), with a
// broken double over the conditions for the condition variants (BrokenCondition.h). Each call
// builds a new lock over the same backend (after a close()).
class ConditionLocks {
 public:
  ConditionLocks(const Args& args, Recorder& recorder) : args_(args), recorder_(recorder) {
    const auto sink = [&recorder](Op op) { recorder.append(std::move(op)); };
    std::shared_ptr<dlock::IOperator> backend = dlock::connect(args.uri);
    auto conditions = std::dynamic_pointer_cast<dlock::IConditionOperator>(backend);
    if (!conditions) throw dlock::ConfigError("dlock_nemesis_client: " + backend->describe() + " has no conditions");
    if (!args.broken.empty()) conditions = dlock::nemesis::brokenCondition(conditions, backend, args.broken, args.uri);
    auto evidence = std::make_shared<dlock::nemesis::LeaseRecorder>(backend, sink);
    backend_ = std::make_shared<dlock::nemesis::ConditionRecorder>(evidence, conditions, sink);
  }

  [[nodiscard]] std::shared_ptr<dlock::ILock> build() const {
    dlock::LockBuilder builder;
    builder.backend(backend_).watchdogLease(args_.lease).waiterLease(args_.lease * 2);
    if (args_.fair) builder.fair();
    auto lock = builder.build();
    lock->onLockLost([&recorder = recorder_](std::string_view key, std::uint64_t token) {
      recorder.record(Kind::Info, "lost", std::string(key), token, "");
    });
    return lock;
  }
  [[nodiscard]] dlock::nemesis::ConditionRecorder& backend() const { return *backend_; }

 private:
  const Args& args_;
  Recorder& recorder_;
  std::shared_ptr<dlock::nemesis::ConditionRecorder> backend_;
};

// A --control request's role field for a condition client (HoldRequest::permits).
constexpr std::uint32_t kRoleProducer = 1;
[[maybe_unused]] constexpr std::uint32_t kRoleConsumer = 2;  // named for the protocol
// A producer that holds until the runner ends its hold, then awaits notFull at once whatever its
// buffer holds (the runner's fault is then on the await in flight), for a third of
// --acquire-timeout-ms, and puts while the lock says it holds the key.
constexpr std::uint32_t kRoleAwaitOnRelease = 3;

// One bounded-buffer client's loop over the public classes: a producer (every fifth client, by
// id) or a consumer takes a key with ILock::tryLock; while its buffer is full (empty), it awaits
// notFull (notEmpty) once with Condition::awaitFor, for the acquire timeout (an unasked producer
// leaves the first key to the producers the nemesis asks); then, while the lock says it holds
// (isHeld; also after an await that threw), it holds, puts a new item (takes the head it read)
// with a fenced write of its current fencing token (the store refuses a stale one), and signals
// the other side with Condition::signal or signalAll (drawn), whether or not it still holds the
// key, for the library to refuse; then unlock. Drawn from the seed: a CancelSource cancelling
// one acquire or await in eight at a moment inside it, and one await in sixteen ended by the
// lock's close() (the lock is then built again). A hold the nemesis asks for (--control) takes
// the role its PERMITS field names (kRole…; 0 its own).
class ConditionWorkload {
 public:
  ConditionWorkload(const Args& args, Recorder& recorder, dlock::nemesis::FencedStore& store,
                    const ConditionLocks& locks)
      : args_(args), recorder_(recorder), store_(store), locks_(locks), lock_(locks.build()),
        random_(args.seed * 1000003 + static_cast<std::uint64_t>(args.id)), pick_(0, args.keys.size() - 1),
        holdFor_(args.hold.count(), args.holdMax.count()) {}

  void iteration() {
    const std::optional<HoldRequest> request = pendingRequest(args_.control);
    const std::uint32_t role = request ? request->permits : 0;
    const bool producer = role != 0 ? role == kRoleProducer || role == kRoleAwaitOnRelease : args_.id % 5 == 0;
    // Only the producers the nemesis asks put into the first key, so consumers there await.
    const std::size_t pick = producer && !request && args_.keys.size() > 1 ? 1 + pick_(random_) % (args_.keys.size() - 1)
                                                                           : pick_(random_);
    const std::string& key = request ? args_.keys.front() : args_.keys[pick];
    const milliseconds timeout =
        request && request->acquireTimeout.count() > 0 ? request->acquireTimeout : args_.acquireTimeout;
    const auto acquired = recorder_.step("acquire", key, 0, [&] {
      const bool taken = request && request->lease.count() > 0 ? lock_->tryLock(key, timeout, request->lease)
                                                               : tryLockMaybeCancelled(key, timeout, request.has_value());
      if (!taken) return Outcome{Kind::Fail, "timeout", 0};
      const std::uint64_t fence = fenceOf(key);
      return Outcome{Kind::Ok, locks_.backend().ownerOf(key, fence), fence};
    });
    if (!acquired || acquired->kind != Kind::Ok) return;
    const std::uint64_t token = acquired->token;  // the release's record pairs with the acquire's
    // A short await first, so that the await the fault strikes finds its channels subscribed
    // (they linger): its script, not a subscription, is what the fault meets.
    if (role == kRoleAwaitOnRelease) (void)await(key, "notFull", milliseconds(10), true);
    const std::string holding = request ? startRequestedHold(recorder_, args_, key, token, *request) : std::string();
    section(key, producer, role == kRoleAwaitOnRelease, request ? request->max : milliseconds(holdFor_(random_)),
            holding);
    release(key, token);
    if (closed_) {  // a close() ended this lock: the next round runs on a new one
      lock_ = locks_.build();
      closed_ = false;
    }
  }

 private:
  // tryLock, one time in eight (never for the nemesis's holds) with a cancel at a drawn moment inside its wait.
  bool tryLockMaybeCancelled(const std::string& key, milliseconds timeout, bool requested) {
    if (requested || random_() % 8 != 0) return lock_->tryLock(key, timeout);
    dlock::CancelSource cancel;
    const milliseconds at(std::uniform_int_distribution<long long>(0, timeout.count())(random_));
    const DrawnMoment moment(at, [this, cancel, key]() mutable {
      recorder_.record(Kind::Info, "cancel", key, 0, "acquire");
      cancel.requestCancel();
    });
    return lock_->tryLock(key, timeout, cancel.token());
  }

  void release(const std::string& key, std::uint64_t token) {
    (void)recorder_.step("release", key, token, [&] {
      lock_->unlock(key);
      return Outcome{};
    });
    // A release that failed on the connection keeps the hold: dropped quietly, its lease ends on its own.
    stepName = "release-retry";
    stepStartNs = dlock::nemesis::monotonicNs();
    if (lock_->holdCount(key) > 0) (void)lock_->unlockQuietly(key);
    stepStartNs = 0;
  }

  // This thread's fencing token of `key`, 0 when it has no hold of it.
  [[nodiscard]] std::uint64_t fenceOf(const std::string& key) const {
    return lock_->holdCount(key) > 0 ? lock_->fencingToken(key) : 0;
  }

  // The buffer as this side reads it: a producer its length, a consumer its head ("" when empty).
  std::optional<Outcome> look(const std::string& key, std::uint64_t fence, bool producer) {
    return recorder_.step("read", key, fence, [&] {
      return Outcome{Kind::Ok, producer ? std::to_string(store_.bufferLength(key)) : store_.bufferHead(key), 0};
    });
  }
  [[nodiscard]] bool blocked(bool producer, const std::string& seen) const {
    return producer ? std::stoll(seen) >= static_cast<long long>(args_.capacity) : seen.empty();
  }

  // One await of `name`, maybe cancelled or closed at a drawn moment (never in a nemesis's hold):
  // true once it returned (signalled or timed out, the key held again).
  bool await(const std::string& key, const std::string& name, milliseconds timeout, bool requested) {
    dlock::Condition condition = lock_->newCondition(key, name);
    const std::uint64_t fence = fenceOf(key);
    const std::string owner = locks_.backend().ownerOf(key, fence);
    const std::uint64_t draw = requested ? 16 : random_() % 16;  // 0, 1: a cancel; 2: a close()
    const milliseconds at(std::uniform_int_distribution<long long>(0, timeout.count())(random_));
    dlock::CancelSource cancel;
    std::optional<DrawnMoment> moment;
    if (draw < 2) {
      moment.emplace(at, [this, cancel, key]() mutable {
        recorder_.record(Kind::Info, "cancel", key, 0, "await");
        cancel.requestCancel();
      });
    } else if (draw == 2) {
      moment.emplace(at, [this, key] {
        recorder_.record(Kind::Info, "close", key, 0, "await");
        closed_ = true;  // read once the moment is joined
        lock_->close();
      });
    }
    const auto woke = recorder_.step(
        "await", key, fence,
        [&] {
          const bool signalled = condition.awaitFor(timeout, cancel.token());
          return Outcome{Kind::Ok, name, fenceOf(key), signalled ? "signalled" : "timed out"};
        },
        0, name);
    moment.reset();
    locks_.backend().closePlace(key, owner, name);
    return woke.has_value();
  }

  void section(const std::string& key, bool producer, bool awaitOnRelease, milliseconds length,
               const std::string& holding) {
    const std::string waitOn = producer ? "notFull" : "notEmpty";
    const std::string wake = producer ? "notEmpty" : "notFull";
    std::optional<Outcome> seen = look(key, fenceOf(key), producer);
    if (awaitOnRelease) {  // the nemesis's hold, then the await it strikes
      holdFor(recorder_, args_, [&] { return lock_->isHeld(key); }, key, fenceOf(key), length, holding);
      (void)await(key, waitOn, args_.acquireTimeout / 3, true);
      if (!lock_->isHeld(key)) return;  // as a careful user: nothing done without the key
      seen = look(key, fenceOf(key), producer);
    } else if (seen && blocked(producer, seen->value) && !stopping) {
      // An await that threw may keep the hold (the lock says): the section goes on while it does.
      if (!await(key, waitOn, args_.acquireTimeout, false) && !lock_->isHeld(key)) return;
      seen = look(key, fenceOf(key), producer);
    }
    if (!seen || blocked(producer, seen->value) || stopping) return;  // this round gives up
    const std::uint64_t fence = fenceOf(key);
    if (!awaitOnRelease) holdFor(recorder_, args_, [&] { return lock_->isHeld(key); }, key, fence, length, holding);
    const std::int64_t lookedNs = dlock::nemesis::monotonicNs();
    if (lock_->isHeld(key)) {
      const std::string item = producer ? "c" + std::to_string(args_.id) + "-" + std::to_string(++produced_) : seen->value;
      (void)recorder_.step(
          "fenced-write", key, fence,
          [&] {
            const bool accepted = producer ? store_.bufferPut(key, fence, item) : store_.bufferTake(key, fence, item);
            return Outcome{Kind::Ok, accepted ? "accepted" : "rejected", 0, (producer ? "put " : "take ") + item};
          },
          lookedNs);
    }
    signal(key, wake, fence);
  }

  // signal() or signalAll(), drawn; the record says how many waiters it moved, and "one" for signal().
  void signal(const std::string& key, const std::string& name, std::uint64_t fence) {
    const bool all = random_() % 2 == 0;
    (void)recorder_.step(
        "signal", key, fence,
        [&] {
          dlock::Condition condition = lock_->newCondition(key, name);
          all ? condition.signalAll() : condition.signal();
          return Outcome{Kind::Ok,
                         name + " " + std::to_string(dlock::nemesis::ConditionRecorder::lastSignalMoved()) + (all ? "" : " one"),
                         0};
        },
        0, name);
  }

  const Args& args_;
  Recorder& recorder_;
  dlock::nemesis::FencedStore& store_;
  const ConditionLocks& locks_;
  std::shared_ptr<dlock::ILock> lock_;
  std::atomic<bool> closed_{false};  // a close() ended lock_ during this round
  std::mt19937_64 random_;
  std::uniform_int_distribution<std::size_t> pick_;
  std::uniform_int_distribution<long long> holdFor_;
  long long produced_ = 0;
};

// What an election client records its clock readings in: steady_clock is CLOCK_MONOTONIC here.
std::int64_t steadyNs(steady_clock::time_point at) { return duration_cast<nanoseconds>(at.time_since_epoch()).count(); }

// Terms this long (ms), one in five, outlast several renewals and the observers' restarts.
constexpr long long kLongTermMin = 1000;
constexpr long long kLongTermMax = 1500;
// A campaign gives up after this (a cancel), and queues again at once.
constexpr milliseconds kCampaignBound{8000};

// One election client over the public classes: ElectionBuilder().backend(b).name(first key)
// .lease(--lease-ms).build(), over the lease evidence and the leader records (ElectionRecorder.h).
// Its loop campaigns (`acquire`: campaign(value, cancel)), records the term's start and local
// deadline (`term`: time = the moment campaign returned, value = validUntil() in ns), then, while
// the term lasts (a drawn length, or the nemesis's hold), looks every 2 ms: isLeader() and
// validUntil(), each new deadline recorded (`term-valid`), `invalid` once it no longer leads.
// Each term observes itself (watch "sN", started as it begins): the term lasts at least until
// that watch's first report (or ElectionChecks.h's kOwnWatchBound), and its one proclaim in three comes after it. A
// leader still leading at the end writes its term once to the fenced store (`fenced-write`:
// FencedStore::writeTerm, dated from the look that found it leading); then it resigns
// (`release`). onLost is recorded as `lost`. A second thread observes too, its watch stopped and
// started again every 300-900 ms. A watch is recorded as `observe` (invoke; ok once subscribed,
// value = its id), its reports as `observed` (token = the term, value = "ID leader|none SKIPPED",
// message = the value), its end as `watch-stop`.
class ElectionWorkload {
 public:
  ElectionWorkload(const Args& args, Recorder& recorder, dlock::nemesis::FencedStore& store)
      : args_(args), recorder_(recorder), store_(store), key_(args.keys.front()),
        random_(args.seed * 1000003 + static_cast<std::uint64_t>(args.id)),
        holdFor_(args.hold.count(), args.holdMax.count()) {
    backend_ = std::make_shared<dlock::nemesis::ElectionRecorder>(dlock::connect(args.uri),
                                                                  [&recorder](Op op) { recorder.append(std::move(op)); });
    election_ = dlock::ElectionBuilder().backend(backend_).name(key_).lease(args.lease).build();
    election_->onLost([this](const dlock::Leadership& lost) {
      recorder_.record(Kind::Info, "lost", key_, lost.fencingToken(), "");
    });
  }
  ElectionWorkload(const ElectionWorkload&) = delete;
  ElectionWorkload& operator=(const ElectionWorkload&) = delete;
  ~ElectionWorkload() {
    if (observer_.joinable()) observer_.join();
    if (stopWatch_.joinable()) stopWatch_.join();
    election_->close();
  }

  void start() {
    observer_ = std::thread([this] { observeLoop(); });
    // SIGTERM ends a waiting campaign (its cancel) rather than the hang bound.
    stopWatch_ = std::thread([this] {
      while (!stopping) std::this_thread::sleep_for(20ms);
      const std::lock_guard<std::mutex> guard(mutex_);
      campaignCancel_.requestCancel();
    });
  }

  void iteration() {
    std::optional<HoldRequest> request = pendingRequest(args_.control);
    const std::string value = "c" + std::to_string(args_.id) + "-" + std::to_string(++values_);
    dlock::Leadership term;
    std::int64_t startNs = 0;
    const auto campaigned = recorder_.step(
        "acquire", key_, 0,
        [&] {
          dlock::CancelSource cancel;
          {
            const std::lock_guard<std::mutex> guard(mutex_);
            campaignCancel_ = cancel;
          }
          if (stopping) cancel.requestCancel();
          const DrawnMoment bound(kCampaignBound, [cancel]() mutable { cancel.requestCancel(); });
          try {
            term = election_->campaign(value, cancel.token());
          } catch (const dlock::InterruptedError&) {
            return Outcome{Kind::Fail, "timeout", 0};
          }
          startNs = dlock::nemesis::monotonicNs();
          return Outcome{Kind::Ok, backend_->ownerOf(term.fencingToken()), term.fencingToken()};
        },
        0, value);
    if (!campaigned || campaigned->kind != Kind::Ok || !term) return;
    const std::uint64_t number = term.fencingToken();
    // A request that came while this client queued takes this term (a second campaign would wait
    // out every other candidate's term).
    if (!request) request = pendingRequest(args_.control);
    recorder_.record(Kind::Info, "term", key_, number, std::to_string(steadyNs(term.validUntil())), "", value, startNs);
    const std::string holding = request ? startRequestedHold(recorder_, args_, key_, number, *request) : std::string();
    const bool longTerm = random_() % 5 == 0;
    const milliseconds length = request    ? request->max
                                : longTerm ? milliseconds(std::uniform_int_distribution<long long>(kLongTermMin, kLongTermMax)(random_))
                                           : milliseconds(holdFor_(random_));
    lead(term, length, holding, random_() % 3 == 0);
    (void)recorder_.step("release", key_, number, [&] {
      term.resign();
      return Outcome{};
    });
    // A resign that failed on the connection keeps the term: dropped, it resigns quietly.
    stepName = "release-retry";
    stepStartNs = dlock::nemesis::monotonicNs();
    term = dlock::Leadership();
    stepStartNs = 0;
  }

 private:
  // The term's section: looks every 2 ms until `length` passed, the nemesis ended its hold, or
  // the term ended for this client; the fenced write once, and a proclaim when `proclaim`.
  void lead(dlock::Leadership& term, milliseconds length, const std::string& holding, bool proclaim) {
    const std::uint64_t number = term.fencingToken();
    const auto end = steady_clock::now() + length;
    // Its own watch of its term: the term lasts until that watch's first report (or the bound).
    const auto reported = std::make_shared<std::atomic<bool>>(false);
    const std::string own = "s" + std::to_string(++ownWatches_);
    dlock::ElectionWatch ownWatch = startWatch(own, reported);
    const auto ownBound = steady_clock::now() + dlock::nemesis::kOwnWatchBound;
    std::int64_t lastValid = 0;
    std::int64_t lastLeadingNs = 0;
    bool ended = false;
    while (!stopping) {
      const auto now = steady_clock::now();
      const bool awaiting = !ended && !*reported && now < ownBound;
      if ((now >= end && !awaiting) || (!holding.empty() && !exists(holding))) break;
      if (ended) {  // a lost term waits out its section, as a lock's holder does
        std::this_thread::sleep_for(2ms);
        continue;
      }
      const std::int64_t lookedNs = dlock::nemesis::monotonicNs();
      if (!term.isLeader()) {
        recorder_.record(Kind::Info, "invalid", key_, number, std::to_string(lastLeadingNs));
        ended = true;
        continue;
      }
      lastLeadingNs = lookedNs;
      const std::int64_t valid = steadyNs(term.validUntil());
      if (valid != lastValid) {
        recorder_.record(Kind::Info, "term-valid", key_, number, std::to_string(valid), "", "", lookedNs);
        lastValid = valid;
      }
      if (proclaim && *reported) {  // after the watch's first read: a proclaim's message wakes a watch
        proclaim = false;
        const std::string value = "c" + std::to_string(args_.id) + "-" + std::to_string(++values_);
        (void)recorder_.step(
            "proclaim", key_, number,
            [&] {
              term.proclaim(value);
              return Outcome{};
            },
            0, value);
      }
      std::this_thread::sleep_for(2ms);
    }
    ownWatch.stop();
    recorder_.record(Kind::Info, "watch-stop", key_, 0, own);
    if (ended) return;
    if (lastLeadingNs != 0) recorder_.record(Kind::Info, "held", key_, number, std::to_string(lastLeadingNs));
    // The term's work ends with its fenced write, while a last look finds it leading (the write
    // ends a hold for the runner, as the lock workload's does).
    const std::int64_t lookedNs = dlock::nemesis::monotonicNs();
    if (stopping || !term.isLeader()) return;
    (void)recorder_.step(
        "fenced-write", key_, number,
        [&] { return Outcome{Kind::Ok, store_.writeTerm(key_, number) ? "accepted" : "rejected", 0}; }, lookedNs);
  }

  // Watches the leader, restarting the watch every 300-900 ms (drawn), until the run stops. Not
  // a step: the hang watch follows the main thread's steps only.
  void observeLoop() {
    std::mt19937_64 random(args_.seed * 7919 + static_cast<std::uint64_t>(args_.id));
    std::uniform_int_distribution<long long> restart(300, 900);
    for (std::uint64_t id = 1; !stopping; ++id) {
      const std::string watch = std::to_string(id);
      dlock::ElectionWatch observing = startWatch(watch, std::make_shared<std::atomic<bool>>(false));
      const auto until = steady_clock::now() + milliseconds(restart(random));
      while (!stopping && steady_clock::now() < until) std::this_thread::sleep_for(10ms);
      observing.stop();
      recorder_.record(Kind::Info, "watch-stop", key_, 0, watch);
    }
  }

  // observe() recorded as watch `id` (`observe` invoke and ok, each report `observed`); `reported`
  // turns true at its first report. An empty watch when observe() failed (recorded).
  dlock::ElectionWatch startWatch(const std::string& id, const std::shared_ptr<std::atomic<bool>>& reported) {
    recorder_.record(Kind::Invoke, "observe", key_, 0, id);
    try {
      dlock::ElectionWatch watch = election_->observe([this, id, reported](const dlock::LeaderInfo& now) {
        recorder_.record(Kind::Info, "observed", key_, now.term,
                         id + (now.hasLeader ? " leader " : " none ") + std::to_string(now.skippedTerms), "", now.value);
        *reported = true;
      });
      recorder_.record(Kind::Ok, "observe", key_, 0, id);
      return watch;
    } catch (const dlock::LockError& error) {
      recorder_.record(Kind::Fail, "observe", key_, 0, id, "LockError", error.what());
      return {};
    }
  }

  const Args& args_;
  Recorder& recorder_;
  dlock::nemesis::FencedStore& store_;
  const std::string key_;
  std::shared_ptr<dlock::nemesis::ElectionRecorder> backend_;
  std::shared_ptr<dlock::Election> election_;
  std::mt19937_64 random_;
  std::uniform_int_distribution<long long> holdFor_;
  long long values_ = 0;
  std::uint64_t ownWatches_ = 0;
  std::mutex mutex_;
  dlock::CancelSource campaignCancel_;  // guarded by mutex_: the campaign under way
  std::thread observer_;
  std::thread stopWatch_;
};

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
  std::unique_ptr<SharedClasses> holder;
  std::unique_ptr<ConditionLocks> conditions;
  std::unique_ptr<ElectionWorkload> election;
  (void)recorder.step("setup", "", 0, [&] {
    if (args.primitive == "elect") {
      election = std::make_unique<ElectionWorkload>(args, recorder, store);
    } else if (args.primitive == "lock") {
      lock = buildLock(args, recorder);
    } else if (args.primitive == "cond") {
      conditions = std::make_unique<ConditionLocks>(args, recorder);
    } else {
      holder = std::make_unique<SharedClasses>(args, recorder);
    }
    return Outcome{};
  });
  if (!lock && !holder && !conditions && !election) {
    done = true;
    hangWatch.join();
    return 1;
  }

  const auto end = steady_clock::now() + args.run;
  if (election) {
    election->start();
    while (!stopping && steady_clock::now() < end) election->iteration();
    stopping = true;  // the observer's and the campaign's threads end with the loop
  } else if (lock) {
    Workload workload(args, recorder, store, *lock);
    while (!stopping && steady_clock::now() < end) workload.iteration();
  } else if (conditions) {
    ConditionWorkload workload(args, recorder, store, *conditions);
    while (!stopping && steady_clock::now() < end) workload.iteration();
  } else {
    SharedWorkload workload(args, recorder, store, *holder);
    while (!stopping && steady_clock::now() < end) workload.iteration();
  }

  // Closing the lock and its connections is watched for hangs like any step.
  stepName = "shutdown";
  stepStartNs = dlock::nemesis::monotonicNs();
  lock.reset();
  election.reset();
  holder.reset();
  conditions.reset();
  stepStartNs = 0;
  done = true;
  hangWatch.join();
  return 0;
}
