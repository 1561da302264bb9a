// SPDX-License-Identifier: Apache-2.0
// The README's least-privilege ACL line for one server: a user granted exactly it passes connect()
// and runs every primitive; one granted it less any one rule fails in connect(), the message naming
// what is missing and the whole rule, never later in a lock() with a script's refusal.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "ReadmeAcl.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"

using dlock::test::RedisClient;
using dlock::test::RedisProcess;

namespace {

std::string lowered(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

}  // namespace

TEST_SUITE("Acl") {
  TEST_CASE("the README's ACL line for one server grants every primitive, and each of its rules is needed") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    const std::vector<std::string> line = dlock::test::readmeAclLine("single");
    const std::string uri = dlock::test::withAclUser(server.uri());
    admin.ok(line);
    dlock::test::useEveryPrimitive(dlock::connect(uri));

    for (const std::string& rule : line) {
      if (rule.size() < 2 || rule[0] != '+') continue;
      CAPTURE(rule);
      admin.ok({"ACL", "DELUSER", "locks"});
      admin.ok(dlock::test::withoutRule(line, rule));
      try {
        (void)dlock::connect(uri);
        FAIL("connect() passed without " << rule);
      } catch (const dlock::BackendError& error) {
        const std::string message = lowered(error.what());
        CHECK(message.find(rule.substr(1)) != std::string::npos);  // names what is missing
        CHECK(message.find("acl setuser <user> ~dlock:* &dlock:*") != std::string::npos);  // and the whole rule
      }
    }
  }
}
