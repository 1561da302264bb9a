// SPDX-License-Identifier: Apache-2.0
// ReadmeAcl.h — the README's least-privilege ACL lines (after "<!-- acl: single -->", "sentinel",
// "cluster"), read from the README itself so that the tests check what users copy, and a run of
// every primitive through a backend made for such a user.
//
//   readmeAclLine(topology)        the ACL SETUSER line's argv ("ACL", "SETUSER", "locks", ...)
//   withoutRule(line, rule)        the line with one of its rules ("+zadd") left out
//   withAclUser(uri)               the URI with the line's user and password ("locks:secret@")
//   useEveryPrimitive(backend)     lock, fair lock, read-write lock (a downgrade, an upgrade),
//                                  semaphore,
//                                  Condition (await and signal), each contended once
//
// Needs DLOCK_SOURCE_DIR. Owner: one test. Thread safety: none needed.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dlock/IOperator.h"
#include "dlock/core/Condition.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/ReadWriteLock.h"
#include "dlock/core/Semaphore.h"
#include "dlock/core/SemaphoreBuilder.h"

namespace dlock::test {

inline std::vector<std::string> readmeAclLine(const std::string& topology) {
  std::ifstream readme(std::string(DLOCK_SOURCE_DIR) + "/README.md");
  const std::string marker = "<!-- acl: " + topology + " -->";
  std::string line;
  bool found = false;
  while (std::getline(readme, line)) {
    if (line == marker) found = true;
    if (found && line.rfind("ACL SETUSER ", 0) == 0) {
      std::vector<std::string> argv;
      std::istringstream words(line);
      for (std::string word; words >> word;) argv.push_back(word);
      return argv;
    }
  }
  throw std::runtime_error("README.md has no ACL SETUSER line after " + marker);
}

inline std::vector<std::string> withoutRule(std::vector<std::string> line, const std::string& rule) {
  for (auto it = line.begin(); it != line.end(); ++it) {
    if (*it == rule) {
      line.erase(it);
      return line;
    }
  }
  throw std::runtime_error("the ACL line has no rule " + rule);
}

inline std::string withAclUser(const std::string& uri) {
  const auto scheme = uri.find("://");
  return uri.substr(0, scheme + 3) + "locks:secret@" + uri.substr(scheme + 3);
}

inline void useEveryPrimitive(const std::shared_ptr<IOperator>& backend) {
  using namespace std::chrono_literals;
  for (const bool fair : {false, true}) {
    CAPTURE(fair);
    const auto a = LockBuilder().backend(backend).fair(fair).build();
    const auto b = LockBuilder().backend(backend).fair(fair).build();
    REQUIRE(a->tryLock("acl"));
    bool waited = false;
    std::thread waiter([&] {  // registered or queued, then woken by the release
      waited = b->tryLock("acl", 5s);
      if (waited) b->unlock("acl");
    });
    std::this_thread::sleep_for(20ms);
    a->unlock("acl");
    waiter.join();
    CHECK(waited);
    REQUIRE(a->tryLock("acl-cond"));
    Condition condition = a->newCondition("acl-cond", "c");
    CHECK_FALSE(condition.awaitFor(10ms));  // awaited, and the key re-taken
    condition.signalAll();
    a->unlock("acl-cond");
  }
  const auto rw = LockBuilder().backend(backend).buildReadWrite();
  REQUIRE(rw->writeLock()->tryLock("acl-rw"));
  REQUIRE(rw->readLock()->tryLock("acl-rw"));
  rw->writeLock()->unlock("acl-rw");  // a downgrade
  CHECK(rw->tryUpgrade("acl-rw"));
  rw->writeLock()->unlock("acl-rw");
  rw->readLock()->unlock("acl-rw");
  const auto semaphore = SemaphoreBuilder().backend(backend).name("acl-sem").permits(2).build();
  PermitLease permits = semaphore->tryAcquire(2);
  CHECK(static_cast<bool>(permits));
  permits.release();
}

}  // namespace dlock::test
