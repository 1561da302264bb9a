// SPDX-License-Identifier: Apache-2.0
// BrokenCondition.h — deliberately broken conditions for `dlock_nemesis_client --primitive cond
// --broken <variant>`, so that the condition checks are seen failing (scripts/nemesis --broken).
// Test code only: doubles over IConditionOperator that forward every call to the real operator
// but one decision; the library is not changed.
//
//   cond-await-two-steps      await releases the key (the lock's unlock) and joins the condition
//                             in a second step (the key taken back with the same token and the
//                             library's await run over it): a signal that falls between the two
//                             is lost. Between the steps it lets another process's hold of the key
//                             run (it waits up to 1 s for the key's next release message), the
//                             interleaving that loses one, made likely
//   cond-signal-no-owner-check  a signal the server refused (not the owner) is sent again with the
//                             token of whoever holds the key now (read from the server: single
//                             server only) and reported as the owner's
// Owner: one client process. Thread safety: thread-safe, as the wrapped operators.
#pragma once

#include <dlock/IConditionOperator.h>
#include <dlock/IOperator.h>

#include <memory>
#include <string>
#include <vector>

namespace dlock::nemesis {

[[nodiscard]] const std::vector<std::string>& brokenConditionVariants();

// `conditions` wrapped for `variant`; `lock` is the exclusive lock over the same keys, `uri` the
// lock server's.
[[nodiscard]] std::shared_ptr<IConditionOperator> brokenCondition(std::shared_ptr<IConditionOperator> conditions,
                                                                  std::shared_ptr<IOperator> lock,
                                                                  const std::string& variant, const std::string& uri);

}  // namespace dlock::nemesis
