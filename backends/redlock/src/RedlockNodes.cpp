// SPDX-License-Identifier: Apache-2.0
#include "RedlockNodes.h"

#include <cmath>
#include <functional>

#include "dlock/Validation.h"

namespace dlock::detail {
namespace {

std::vector<std::size_t> allNodes(std::size_t count) {
  std::vector<std::size_t> nodes(count);
  for (std::size_t i = 0; i < count; ++i) nodes[i] = i;
  return nodes;
}

std::string describeMembers(const std::vector<std::shared_ptr<IOperator>>& members) {
  std::string text = "redlock://";
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (i > 0) text += ";";
    text += members[i]->describe();
  }
  return text;
}

}  // namespace

void Failures::add(const Failures& more) {
  count += more.count;
  allBackend = allBackend && more.allBackend;
  text += (text.empty() ? "" : "; ") + more.text;
}

RedlockNodes::RedlockNodes(std::vector<std::shared_ptr<IOperator>> members, RedlockOptions options)
    : members_(std::move(members)),
      options_(options),
      quorum_(members_.size() / 2 + 1),
      all_(allNodes(members_.size())),
      description_(describeMembers(members_)),
      workers_(members_.size(), options_.threadsPerNode + 1) {}

std::size_t RedlockNodes::shardOf(std::string_view key) const {
  return std::hash<std::string_view>{}(key) % options_.threadsPerNode;
}

std::chrono::milliseconds RedlockNodes::validityOf(std::chrono::milliseconds ttl, const char* operation,
                                                   std::string_view key) const {
  const double scaled = std::ceil(static_cast<double>(ttl.count()) * options_.clockDriftFactor);
  const std::chrono::milliseconds drift =
      std::chrono::milliseconds(static_cast<std::chrono::milliseconds::rep>(scaled)) + options_.clockDriftMargin;
  if (ttl <= drift) {
    throw InvalidArgumentError("dlock: " + std::string(operation) + " " + quoteKey(key) + " on " + description_ +
                               ": a lease of " + std::to_string(ttl.count()) +
                               " ms is not longer than the clock drift allowance of " + std::to_string(drift.count()) +
                               " ms");
  }
  return ttl - drift;
}

void RedlockNodes::throwUndecided(const std::string& operation, std::string_view key, const std::string& problem,
                                  const Failures& failures) const {
  std::string message = "dlock: " + operation + " " + quoteKey(key) + " on " + description_ + " (" +
                        std::to_string(members_.size()) + " nodes, quorum " + std::to_string(quorum_) + "): " + problem;
  if (!failures.text.empty()) message += ": " + failures.text;
  if (failures.count > 0 && failures.allBackend) throw BackendError(message);
  throw ConnectionError(message);
}

}  // namespace dlock::detail
