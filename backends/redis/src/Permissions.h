// SPDX-License-Identifier: Apache-2.0
// Permissions.h — every command dlock will send a data node, and a check, at connect(), that the
// ACL user may run each of them: the scripts' inner commands too, which Redis checks only when a
// script runs them ("The user executing the script can't run this command").
//
//   neededCommands(topology, names, waits)  one sample argv per command, on keys and channels
//                                           named as dlock names them (`names`: a sample key)
//   aclRule(commands, prefix)               the rule that grants them: "~dlock:* &dlock:* +get ..."
//   refusedCommands(connection, commands)   those the connection's user may not run (Redis 7's
//                                           redis.acl_check_cmd in one script; none before 7)
//
// Owner: the caller. Thread safety: pure functions, but for the connection.
#pragma once

#include <string>
#include <vector>

#include "Connection.h"
#include "KeyNames.h"
#include "Topology.h"

namespace dlock::detail {

using CommandSample = std::vector<std::string>;

[[nodiscard]] std::vector<CommandSample> neededCommands(const Topology& topology, const KeyNames& names,
                                                        bool waitsForReplicas);

[[nodiscard]] std::string aclRule(const std::vector<CommandSample>& commands, const std::string& prefix);

// The names of the commands refused (each once, in the order given). The check refused itself
// (NOPERM for EVAL) throws as throwReplyError does; another error reply checks nothing.
[[nodiscard]] std::vector<std::string> refusedCommands(Connection& connection,
                                                       const std::vector<CommandSample>& commands);

}  // namespace dlock::detail
