// SPDX-License-Identifier: Apache-2.0
// ProcessIncrements.h — mutual exclusion across processes through any URI: dlock_test_worker
// processes each do locked read-modify-write increments of a counter kept on a plain server apart
// from the lock's (so that any backend and transport can be checked the same way).
//
//   checkProcessIncrements(uri, counterServer, processes, increments)
//       CHECKs every worker's exit, the exact total, and fencing tokens rising in acquisition order.
// Needs DLOCK_TEST_WORKER (the worker's path) defined by the suite.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ChildProcess.h"
#include "RedisClient.h"
#include "RedisProcess.h"

namespace dlock::test {

inline std::string processIncrementsFile(const std::string& name) {
  return "/tmp/dlock-test-" + std::to_string(::getpid()) + "-" + name;
}

// `processes` workers each doing `increments` locked increments of "counter" through `uri`; the
// counter lives on `counterServer`'s plain port. Checks the total and that each process saw its
// fencing tokens rise.
inline void checkProcessIncrements(const std::string& uri, const RedisProcess& counterServer, int processes, int increments) {
  RedisClient counter(counterServer.host(), counterServer.port());
  (void)counter.ok({"DEL", "counter"});
  std::vector<std::unique_ptr<ChildProcess>> workers;
  std::vector<std::string> logs;
  for (int i = 0; i < processes; ++i) {
    logs.push_back(processIncrementsFile("increments-" + std::to_string(i)));
    std::remove(logs.back().c_str());
    workers.push_back(std::make_unique<ChildProcess>(std::vector<std::string>{
        DLOCK_TEST_WORKER, "increment", uri, "counter-lock", "counter", std::to_string(increments), logs.back(),
        counterServer.host() + ":" + std::to_string(counterServer.port())}));
  }
  for (auto& worker : workers) CHECK(worker->wait() == 0);
  CHECK(counter.ok({"GET", "counter"}).str == std::to_string(processes * increments));
  // Each line: the counter value seen under the lock, and that hold's fencing token. The counter
  // orders the acquisitions; the tokens must rise in that order, in every process and overall.
  std::map<long long, unsigned long long> tokenBySeen;
  for (const auto& path : logs) {
    std::ifstream in(path);
    long long seen = 0;
    unsigned long long token = 0;
    unsigned long long previous = 0;
    int lines = 0;
    while (in >> seen >> token) {
      CHECK(token > previous);
      previous = token;
      CHECK(tokenBySeen.emplace(seen, token).second);  // no value seen twice: no lost update
      ++lines;
    }
    CHECK(lines == increments);
    std::remove(path.c_str());
  }
  CHECK(tokenBySeen.size() == static_cast<std::size_t>(processes * increments));
  unsigned long long previous = 0;
  bool rising = true;
  for (const auto& [seen, token] : tokenBySeen) {
    rising = rising && token > previous;
    previous = token;
  }
  CHECK(rising);
}

}  // namespace dlock::test
