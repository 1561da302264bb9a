// SPDX-License-Identifier: Apache-2.0
// dlock_nemesis_check — checks a finished run by hand: reads every *.history in a directory,
// snapshots the fenced store, scans the lock servers for dlock keys without a TTL, runs the
// checker, prints the summary and the markdown row, and writes report.json and timeline.svg.
// Exit 0 when the run passed, 1 when it failed, 2 on bad arguments or an unreadable run.
//
//   dlock_nemesis_check --histories DIR --store HOST:PORT --lock-servers H:P[,H:P...]
//       --keys k1,k2 --exits c0=0,c1=sig9:nemesis,... [--recovery-ms R] [--prefix dlock:]
//       [--out DIR] [--topology T] [--scenario S] [--seed N] [--cause TEXT] [--fence-cause TEXT]
//       [--holder-faults required] [--primitive rw|sem --capacity C --lease-ms L]
//
// --cause names why sections may overlap in the run (checks 2 and 8; none by default);
// --fence-cause why fencing tokens go back in it (check 3, which then requires that they did);
// --holder-faults required fails the run when no fault hit a holder (check 9; a run by hand has
// no nemesis, so by default faults are only counted).
//
// An exit is `<process>=<code>` or `<process>=sig<N>`, followed by `:nemesis` when the nemesis
// killed it on purpose or `:deadline` when it was killed still running at the deadline.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "Checker.h"
#include "FencedStore.h"
#include "KeyScan.h"
#include "Timeline.h"

namespace {

using namespace dlock::nemesis;

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto end = std::min(text.find(separator, start), text.size());
    if (end > start) parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

ClientExit parseExit(const std::string& text) {
  const auto equals = text.find('=');
  if (equals == std::string::npos) throw std::invalid_argument("an exit is process=status, not '" + text + "'");
  ClientExit exit;
  exit.process = text.substr(0, equals);
  std::string status = text.substr(equals + 1);
  const auto colon = status.find(':');
  if (colon != std::string::npos) {
    const std::string why = status.substr(colon + 1);
    if (why == "nemesis") {
      exit.killedByNemesis = true;
    } else if (why == "deadline") {
      exit.killedAtDeadline = true;
    } else {
      throw std::invalid_argument("unknown exit cause '" + why + "'");
    }
    status.resize(colon);
  }
  if (status.rfind("sig", 0) == 0) {
    exit.signal = std::stoi(status.substr(3));
  } else {
    exit.exitCode = std::stoi(status);
  }
  return exit;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i + 1 < argc; i += 2) args[argv[i]] = argv[i + 1];
  for (const char* required : {"--histories", "--store", "--lock-servers", "--keys", "--exits"}) {
    if (args.count(required) == 0) {
      std::fprintf(stderr, "dlock_nemesis_check: %s is required (see the top of Check.cpp)\n", required);
      return 2;
    }
  }
  try {
    CheckerInput input;
    input.run.topology = args.count("--topology") ? args["--topology"] : "single";
    input.run.scenario = args.count("--scenario") ? args["--scenario"] : "none";
    input.run.seed = args.count("--seed") ? std::stoull(args["--seed"]) : 0;
    if (args.count("--prefix")) input.keyPrefix = args["--prefix"];
    if (args.count("--cause")) input.overlapCause = args["--cause"];
    if (args.count("--fence-cause")) input.fenceRegressionCause = args["--fence-cause"];
    input.fair = args.count("--fair") > 0 && args["--fair"] == "1";
    // A read-write or semaphore run (SharedChecks.h): its capacity and the clients' --lease-ms.
    if (args.count("--primitive")) input.primitive = args["--primitive"];
    if (args.count("--capacity")) input.capacity = static_cast<std::uint32_t>(std::stoul(args["--capacity"]));
    if (args.count("--lease-ms")) input.lease = std::chrono::milliseconds(std::stoll(args["--lease-ms"]));
    input.faults.holderHit = args.count("--holder-faults") > 0 && args["--holder-faults"] == "required";
    if (args.count("--recovery-ms")) input.recoveryBound = std::chrono::milliseconds(std::stoll(args["--recovery-ms"]));
    input.history = readHistories(args["--histories"]);
    // The server's record where the run has one (observer.history); a SET in it is a loss on one server.
    input.serverRecord = std::any_of(input.history.begin(), input.history.end(), [](const Op& op) { return op.process == "server"; });
    input.serverSetsShowLosses = input.run.topology == "single";
    FencedStore store(args["--store"]);
    input.store = store.snapshot(split(args["--keys"], ','));
    for (const auto& server : split(args["--lock-servers"], ',')) {
      for (auto& key : keysWithoutTtl(server, input.keyPrefix + "*")) input.keysWithoutTtl.push_back(std::move(key));
    }
    for (const auto& exit : split(args["--exits"], ',')) input.exits.push_back(parseExit(exit));

    const Report report = check(input);
    const std::string out = args.count("--out") ? args["--out"] : args["--histories"];
    std::ofstream(out + "/report.json") << report.json();
    writeTimeline(out + "/timeline.svg", input.history);
    std::cout << report.summary() << "\n" << Report::markdownHeader() << "\n" << report.markdownRow() << "\n";
    return report.failed() ? 1 : 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "dlock_nemesis_check: %s\n", error.what());
    return 2;
  }
}
