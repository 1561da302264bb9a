// SPDX-License-Identifier: Apache-2.0
// dlock_election_worker — a candidate process for the election tests (fork/exec, not threads).
//
//   dlock_election_worker URI NAME LEASE_MS VALUE STORE_HOST STORE_PORT STORE_KEY
//
// Campaigns in election NAME with VALUE and a lease of LEASE_MS, then prints "leading <term>".
// While it leads, it writes its term to the fenced store STORE_KEY (a Redis string that takes
// only a term at least as high as the one it holds) every 5 ms, printing "refused <term>" when
// the store turns one down. onLost prints "lost <term>". Lines on stdin: "proclaim <text>" →
// "proclaimed" or "proclaim-lost"; "resign" → "resigned" (then it exits). Other errors print
// "error <what>".
#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>

#include "RedisClient.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/Election.h"

namespace {

std::mutex outputMutex;

void say(const std::string& line) {
  std::lock_guard<std::mutex> guard(outputMutex);
  std::cout << line << std::endl;
}

// The fenced store: a term lower than the stored one is refused.
constexpr const char* kFencedWrite = R"lua(
local stored = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) < stored then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1
)lua";

}  // namespace

int main(int argc, char** argv) {
  if (argc != 8) {
    std::cerr << "usage: dlock_election_worker URI NAME LEASE_MS VALUE STORE_HOST STORE_PORT STORE_KEY\n";
    return 2;
  }
  try {
    auto election = dlock::ElectionBuilder()
                        .backend(dlock::connect(argv[1]))
                        .name(argv[2])
                        .lease(std::chrono::milliseconds(std::stoll(argv[3])))
                        .candidateLease(std::chrono::milliseconds(std::stoll(argv[3])))
                        .build();
    election->onLost([](const dlock::Leadership& lost) { say("lost " + std::to_string(lost.fencingToken())); });
    dlock::Leadership term = election->campaign(argv[4]);
    const std::string termText = std::to_string(term.fencingToken());
    say("leading " + termText);
    std::atomic<bool> done{false};
    std::thread writer([&] {
      dlock::test::RedisClient store(argv[5], std::stoi(argv[6]));
      while (!done.load() && term.isLeader()) {
        const auto reply = store.ok({"EVAL", kFencedWrite, "1", argv[7], termText});
        if (reply.integer != 1) say("refused " + termText);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
    std::string line;
    while (std::getline(std::cin, line)) {
      try {
        if (line.rfind("proclaim ", 0) == 0) {
          term.proclaim(line.substr(9));
          say("proclaimed");
        } else if (line == "resign") {
          done = true;
          writer.join();
          term.resign();
          say("resigned");
          return 0;
        }
      } catch (const dlock::LockLostError&) {
        say(line == "resign" ? "resign-lost" : "proclaim-lost");
      }
    }
    done = true;
    if (writer.joinable()) writer.join();
  } catch (const std::exception& error) {
    say(std::string("error ") + error.what());
    return 1;
  }
  return 0;
}
