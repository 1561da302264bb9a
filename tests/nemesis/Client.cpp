// SPDX-License-Identifier: Apache-2.0
// dlock_nemesis_client — one workload process of a fault-testing run. Until --run-ms has passed
// (or SIGTERM), it picks a key, acquires it, does an unfenced read-modify-write of the key's
// counter in the store, a fenced write of its token, and releases; every step is an invoke
// record and a completion record in --history (History.h). Exit 0 at the end; 3 (kHangExitCode)
// when one step outran --hang-ms; 2 on bad arguments; 0 after --help.
//
//   dlock_nemesis_client --uri URI --store HOST:PORT --id N --keys k1,k2 --seed S --run-ms T
//       --lease-ms L --acquire-timeout-ms A --history FILE
//       [--hold-ms H] [--hold-max-ms M] [--hang-ms G] [--fixed-lease-ms F] [--fair 1] [--control FILE]
//       [--broken VARIANT] [--primitive lock|rw|sem|cond] [--capacity C]
//
// The hold between the counter's GET and SET is H ms, or drawn from [H, M] with --hold-max-ms.
// --fair 1 runs the fair lock (LockBuilder::fair) with a waiter lease of --lease-ms.
// --lease-ms is the watchdog's lease; --fixed-lease-ms F acquires with a fixed lease of F instead
// (no renewal), so holds longer than F outlive their lease inside the section. During a hold the
// client checks isHeld() every few ms and records `invalid` once it is false: when its lease
// ended for it (the checker's "both leases valid" needs it).
//
// --control FILE lets the runner ask for a long hold: when FILE exists, holding "LEASE MAX [WAIT
// [PERMITS]]" (ms; LEASE 0: the watchdog's; WAIT: the acquire's timeout, else --acquire-timeout-ms;
// PERMITS: a semaphore client's, 0 for every permit; a condition client's role, 1 producer,
// 2 consumer, 0 its own), the
// next acquisition is of the first key, with that fixed lease;
// once acquired the client renames FILE to FILE.holding, records `hold-start`, and holds until
// the runner removes FILE.holding or MAX ms passed.
// --broken VARIANT runs a deliberately broken lock (BrokenOperator.h; BrokenShared.h for rw, sem;
// BrokenCondition.h for cond).
// --primitive rw or sem runs read-write or semaphore holds (SharedHold.h, capacity C, 3 by
// default) instead of the ILock: SharedWorkload below says what each acquisition does.
// --primitive cond runs the bounded buffer (ConditionHold.h, capacity C): ConditionWorkload below.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlock/dlock.h>
#include <functional>
#include <map>
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
#include "ConditionHold.h"
#include "FencedStore.h"
#include "History.h"
#include "LeaseRecorder.h"
#include "SharedHold.h"

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
  std::string history;
  std::string control;
  std::string broken;
  std::string primitive = "lock";  // lock, rw, sem, cond
  std::uint32_t capacity = 3;
};

constexpr const char* kUsage =
    "usage: dlock_nemesis_client --uri URI --store HOST:PORT --id N --keys k1,k2 --seed S --run-ms T --lease-ms L "
    "--acquire-timeout-ms A --history FILE [--hold-ms H] [--hold-max-ms M] [--hang-ms G] [--fixed-lease-ms F] [--fair 1] "
    "[--control FILE] [--broken VARIANT (BrokenOperator.h, BrokenShared.h, BrokenCondition.h)] [--primitive lock|rw|sem|cond] [--capacity C]\n"
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
  if (auto control = take("--control", false)) args.control = *control;
  if (auto primitive = take("--primitive", false)) args.primitive = *primitive;
  if (args.primitive != "lock" && args.primitive != "rw" && args.primitive != "sem" && args.primitive != "cond") usage("no primitive '" + args.primitive + "'");
  if (auto capacity = take("--capacity", false)) args.capacity = static_cast<std::uint32_t>(number("--capacity", *capacity));
  if (args.capacity == 0) usage("--capacity wants at least 1");
  if (auto broken = take("--broken", false)) {
    args.broken = *broken;
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
};

std::optional<HoldRequest> pendingRequest(const std::string& control) {
  if (control.empty()) return std::nullopt;
  std::FILE* file = std::fopen(control.c_str(), "r");
  if (file == nullptr) return std::nullopt;
  long long lease = 0;
  long long max = 0;
  long long timeout = 0;
  unsigned permits = 0;
  const int read = std::fscanf(file, "%lld %lld %lld %u", &lease, &max, &timeout, &permits);
  std::fclose(file);
  if (read < 2) return std::nullopt;  // being written: read it next time
  return HoldRequest{milliseconds(lease), milliseconds(max), milliseconds(read >= 3 ? timeout : 0), read == 4 ? permits : 0};
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

// One client's loop: acquire, read, hold, write, fenced write, release.
class Workload {
 public:
  Workload(const Args& args, Recorder& recorder, dlock::nemesis::FencedStore& store, dlock::ILock& lock)
      : args_(args), recorder_(recorder), store_(store), lock_(lock),
        random_(args.seed * 1000003 + static_cast<std::uint64_t>(args.id)),
        pick_(0, args.keys.size() - 1), holdFor_(args.hold.count(), args.holdMax.count()) {}

  void iteration() {
    const std::optional<HoldRequest> request = pendingRequest(args_.control);
    const std::string& key = request ? args_.keys.front() : args_.keys[pick_(random_)];
    dlock::Lease lease;
    const auto acquired = recorder_.step("acquire", key, 0, [&] {
      std::optional<milliseconds> leaseTime;
      if (request && request->lease.count() > 0) leaseTime = request->lease;
      const milliseconds timeout =
          request && request->acquireTimeout.count() > 0 ? request->acquireTimeout : args_.acquireTimeout;
      lease = lock_.acquire(key, dlock::AcquireOptions{timeout, leaseTime});
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
};

// The read-write and semaphore holder, over the backend's operators (SharedHold.h), with a broken
// double in between for the shared variants (BrokenShared.h).
std::shared_ptr<dlock::nemesis::ISharedHolder> buildHolder(const Args& args, Recorder& recorder) {
  std::shared_ptr<dlock::IOperator> backend = dlock::connect(args.uri);
  auto readWrite = std::dynamic_pointer_cast<dlock::IReadWriteOperator>(backend);
  auto semaphore = std::dynamic_pointer_cast<dlock::ISemaphoreOperator>(backend);
  if (!args.broken.empty()) {
    if (readWrite) readWrite = dlock::nemesis::brokenReadWrite(readWrite, args.broken, args.uri);
    if (semaphore) semaphore = dlock::nemesis::brokenSemaphore(semaphore, args.broken, args.uri);
  }
  return dlock::nemesis::makeOperatorHolder(readWrite, semaphore, [&recorder](Op op) { recorder.append(std::move(op)); },
                                            args.lease, args.capacity);
}

// One read-write or semaphore client's loop: acquire a read, a write or permits, enter the section
// in the store's act log, act (a writer: the unfenced read-modify-write and the fenced write; a
// reader: a read of the fenced register; a permit holder: nothing but the tally), exit, release.
// A hold the nemesis asks for (--control) is a write, or every permit (so that waiters queue).
class SharedWorkload {
 public:
  SharedWorkload(const Args& args, Recorder& recorder, dlock::nemesis::FencedStore& store,
                 dlock::nemesis::ISharedHolder& holder)
      : args_(args), recorder_(recorder), store_(store), holder_(holder),
        random_(args.seed * 1000003 + static_cast<std::uint64_t>(args.id)), pick_(0, args.keys.size() - 1),
        holdFor_(args.hold.count(), args.holdMax.count()) {}

  void iteration() {
    using dlock::nemesis::SharedMode;
    const std::optional<HoldRequest> request = pendingRequest(args_.control);
    const std::string& key = request ? args_.keys.front() : args_.keys[pick_(random_)];
    dlock::nemesis::SharedRequest ask;
    ask.mode = args_.primitive == "sem" ? SharedMode::Permits
               : request || random_() % 3 == 0 ? SharedMode::Write : SharedMode::Read;
    // One permit, or a third of the time every permit: a release of those admits several waiters.
    ask.permits = ask.mode != SharedMode::Permits         ? 1
                  : request && request->permits > 0       ? request->permits
                  : request || random_() % 3 == 0         ? args_.capacity
                                                          : 1;
    ask.timeout = request && request->acquireTimeout.count() > 0 ? request->acquireTimeout : args_.acquireTimeout;
    if (request) ask.lease = request->lease;
    std::unique_ptr<dlock::nemesis::ISharedHold> hold;
    const auto acquired = recorder_.step("acquire", key, 0, [&] {
      hold = holder_.acquire(key, ask);
      if (!hold) return Outcome{Kind::Fail, "timeout", 0};
      return Outcome{Kind::Ok, hold->ownerToken(), hold->fencingToken()};
    });
    if (!acquired || !hold) return;
    const std::uint64_t token = hold->fencingToken();
    const std::string owner = hold->ownerToken();
    // What the checker replays the act log with: the hold's mode and permits, by owner token.
    recorder_.record(Kind::Info, "mode", key, token,
                     std::string(dlock::nemesis::sharedModeName(ask.mode)) + " " + std::to_string(ask.permits), "", owner);
    const std::string holding = request ? startRequestedHold(recorder_, args_, key, token, *request) : std::string();
    const auto entered = hold->isHeld() ? recorder_.step("enter", key, token, [&] {
      return Outcome{Kind::Ok, std::to_string(store_.act(key, true, owner, ask.permits)), 0};
    })
                                        : std::nullopt;
    if (entered && !stopping) act(*hold, ask.mode, key, token, request ? request->max : milliseconds(holdFor_(random_)),
                                  holding);
    if (entered) {
      (void)recorder_.step("exit", key, token, [&] {
        return Outcome{Kind::Ok, std::to_string(store_.act(key, false, owner, ask.permits)), 0};
      });
    }
    releaseAndDrop(recorder_, key, token, hold);
  }

 private:
  // Inside the section, as a careful user acts: nothing unprotected once the hold ended for its
  // holder (the fenced write still goes, for the store to refuse). Writes and reads are dated
  // from before the look that allowed them.
  void act(const dlock::nemesis::ISharedHold& hold, dlock::nemesis::SharedMode mode, const std::string& key,
           std::uint64_t token, milliseconds length, const std::string& holding) {
    using dlock::nemesis::SharedMode;
    const auto isHeld = [&hold] { return hold.isHeld(); };
    if (mode != SharedMode::Write) {
      holdFor(recorder_, args_, isHeld, key, token, length, holding);
      if (mode == SharedMode::Read && !stopping && hold.isHeld()) {
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
      held = hold.isHeld();
    }
    writeSection(recorder_, store_, key, token, held ? read : std::nullopt, lookedNs);
  }

  const Args& args_;
  Recorder& recorder_;
  dlock::nemesis::FencedStore& store_;
  dlock::nemesis::ISharedHolder& holder_;
  std::mt19937_64 random_;
  std::uniform_int_distribution<std::size_t> pick_;
  std::uniform_int_distribution<long long> holdFor_;
};

// The bounded-buffer holder over the backend's operators (ConditionHold.h), with a broken double
// over its conditions for the condition variants (BrokenCondition.h). A waiter's place lasts two
// leases, renewed every third of that.
std::shared_ptr<dlock::nemesis::ICondHolder> buildConditionHolder(const Args& args, Recorder& recorder) {
  std::shared_ptr<dlock::IOperator> backend = dlock::connect(args.uri);
  auto conditions = std::dynamic_pointer_cast<dlock::IConditionOperator>(backend);
  if (conditions && !args.broken.empty()) {
    conditions = dlock::nemesis::brokenCondition(conditions, backend, args.broken, args.uri);
  }
  return dlock::nemesis::makeConditionHolder(backend, conditions, [&recorder](Op op) { recorder.append(std::move(op)); },
                                             args.lease, args.lease * 2);
}

// One bounded-buffer client's loop: a producer (every fifth client, by id) or a consumer takes a
// key; while its buffer is full (empty), it awaits notFull (notEmpty) once, for the acquire
// timeout (an unasked producer leaves the first key to the producers the nemesis asks); then it
// holds, and once a look found the key held, puts a new item (takes the head it
// read) with a fenced write of its current fencing token (the store refuses a stale one), and
// signals the other side, either way, for the library to refuse when it is not the owner. A hold
// the nemesis asks for (--control) takes the role its PERMITS field names (1 producer, 2
// consumer, 0 its own).
class ConditionWorkload {
 public:
  ConditionWorkload(const Args& args, Recorder& recorder, dlock::nemesis::FencedStore& store,
                    dlock::nemesis::ICondHolder& holder)
      : args_(args), recorder_(recorder), store_(store), holder_(holder),
        random_(args.seed * 1000003 + static_cast<std::uint64_t>(args.id)), pick_(0, args.keys.size() - 1),
        holdFor_(args.hold.count(), args.holdMax.count()) {}

  void iteration() {
    const std::optional<HoldRequest> request = pendingRequest(args_.control);
    const bool producer = request && request->permits != 0 ? request->permits == 1 : args_.id % 5 == 0;
    // Only the producers the nemesis asks put into the first key, so consumers there await.
    const std::size_t pick = producer && !request && args_.keys.size() > 1 ? 1 + pick_(random_) % (args_.keys.size() - 1)
                                                                           : pick_(random_);
    const std::string& key = request ? args_.keys.front() : args_.keys[pick];
    const milliseconds timeout =
        request && request->acquireTimeout.count() > 0 ? request->acquireTimeout : args_.acquireTimeout;
    std::unique_ptr<dlock::nemesis::ICondHold> hold;
    const auto acquired = recorder_.step("acquire", key, 0, [&] {
      hold = holder_.acquire(key, timeout, request ? request->lease : milliseconds(0));
      if (!hold) return Outcome{Kind::Fail, "timeout", 0};
      return Outcome{Kind::Ok, hold->ownerToken(), hold->fencingToken()};
    });
    if (!acquired || !hold) return;
    const std::uint64_t token = hold->fencingToken();  // the release's record pairs with the acquire's
    const std::string holding = request ? startRequestedHold(recorder_, args_, key, token, *request) : std::string();
    section(*hold, key, producer, request ? request->max : milliseconds(holdFor_(random_)), holding);
    releaseAndDrop(recorder_, key, token, hold);
  }

 private:
  // The buffer as this side reads it: a producer its length, a consumer its head ("" when empty).
  std::optional<Outcome> look(const std::string& key, std::uint64_t fence, bool producer) {
    return recorder_.step("read", key, fence, [&] {
      return Outcome{Kind::Ok, producer ? std::to_string(store_.bufferLength(key)) : store_.bufferHead(key), 0};
    });
  }
  [[nodiscard]] bool blocked(bool producer, const std::string& seen) const {
    return producer ? std::stoll(seen) >= static_cast<long long>(args_.capacity) : seen.empty();
  }

  void section(dlock::nemesis::ICondHold& hold, const std::string& key, bool producer, milliseconds length,
               const std::string& holding) {
    const std::string waitOn = producer ? "notFull" : "notEmpty";
    const std::string wake = producer ? "notEmpty" : "notFull";
    std::optional<Outcome> seen = look(key, hold.fencingToken(), producer);
    if (seen && blocked(producer, seen->value) && !stopping) {
      const auto woke = recorder_.step(
          "await", key, hold.fencingToken(),
          [&] {
            (void)hold.await(waitOn, args_.acquireTimeout, args_.acquireTimeout * 10);
            return Outcome{Kind::Ok, waitOn, hold.fencingToken()};
          },
          0, waitOn);
      if (!woke) return;  // not held: nothing to act on
      seen = look(key, hold.fencingToken(), producer);
    }
    if (!seen || blocked(producer, seen->value) || stopping) return;  // this round gives up
    const std::uint64_t fence = hold.fencingToken();
    holdFor(recorder_, args_, [&hold] { return hold.isHeld(); }, key, fence, length, holding);
    const std::int64_t lookedNs = dlock::nemesis::monotonicNs();
    if (hold.isHeld()) {
      const std::string item = producer ? "c" + std::to_string(args_.id) + "-" + std::to_string(++produced_) : seen->value;
      (void)recorder_.step(
          "fenced-write", key, fence,
          [&] {
            const bool accepted = producer ? store_.bufferPut(key, fence, item) : store_.bufferTake(key, fence, item);
            return Outcome{Kind::Ok, accepted ? "accepted" : "rejected", 0, (producer ? "put " : "take ") + item};
          },
          lookedNs);
    }
    (void)recorder_.step(
        "signal", key, fence,
        [&] { return Outcome{Kind::Ok, wake + " " + std::to_string(hold.signalAll(wake)), 0}; }, 0, wake);
  }

  const Args& args_;
  Recorder& recorder_;
  dlock::nemesis::FencedStore& store_;
  dlock::nemesis::ICondHolder& holder_;
  std::mt19937_64 random_;
  std::uniform_int_distribution<std::size_t> pick_;
  std::uniform_int_distribution<long long> holdFor_;
  long long produced_ = 0;
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
  std::shared_ptr<dlock::nemesis::ISharedHolder> holder;
  std::shared_ptr<dlock::nemesis::ICondHolder> conditions;
  (void)recorder.step("setup", "", 0, [&] {
    if (args.primitive == "lock") {
      lock = buildLock(args, recorder);
    } else if (args.primitive == "cond") {
      conditions = buildConditionHolder(args, recorder);
    } else {
      holder = buildHolder(args, recorder);
    }
    return Outcome{};
  });
  if (!lock && !holder && !conditions) {
    done = true;
    hangWatch.join();
    return 1;
  }

  const auto end = steady_clock::now() + args.run;
  if (lock) {
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
  holder.reset();
  conditions.reset();
  stepStartNs = 0;
  done = true;
  hangWatch.join();
  return 0;
}
