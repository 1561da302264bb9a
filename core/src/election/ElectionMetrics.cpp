// SPDX-License-Identifier: Apache-2.0
#include "dlock/core/ElectionMetrics.h"

#include <cstdint>
#include <set>
#include <string_view>

#include "dlock/LockError.h"

namespace dlock {
namespace {

struct Family {
  const char* name;
  const char* type;
  const char* help;
  std::uint64_t (*value)(const Election&);
};

const Family kFamilies[] = {
    {"dlock_election_leader", "gauge", "1 while this process leads the election, else 0.",
     [](const Election& e) -> std::uint64_t { return e.leading() ? 1 : 0; }},
    {"dlock_election_terms_started_total", "counter", "Terms this process began (campaigns that returned).",
     [](const Election& e) { return e.termsStarted(); }},
    {"dlock_election_terms_lost_total", "counter", "Terms of this process that ended without a resign.",
     [](const Election& e) { return e.termsLost(); }},
};

// A label value escaped as the exposition format requires (as Metrics.cpp does for locks).
std::string labelValue(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

std::string formatElectionMetrics(const std::vector<std::shared_ptr<Election>>& elections) {
  std::set<std::string_view> names;
  for (const auto& election : elections) {
    if (!names.insert(election->name()).second) {
      throw ConfigError("dlock: formatElectionMetrics: two elections named '" + election->name() + "'");
    }
  }
  std::string out;
  for (const Family& family : kFamilies) {
    out.append("# HELP ").append(family.name).append(" ").append(family.help).append("\n");
    out.append("# TYPE ").append(family.name).append(" ").append(family.type).append("\n");
    for (const auto& election : elections) {
      out.append(family.name).append("{election=\"").append(labelValue(election->name())).append("\"} ");
      out.append(std::to_string(family.value(*election))).append("\n");
    }
  }
  return out;
}

}  // namespace dlock
