// SPDX-License-Identifier: Apache-2.0
#include "ServerRecord.h"

#include <sstream>

namespace dlock::nemesis {

ServerStamp serverStamp(const Op& op) {
  ServerStamp stamp;
  const auto bar = op.message.find(" |");
  if (bar == std::string::npos) {
    stamp.node = op.message;
    stamp.serverUs = op.timeNs / 1000;
    return stamp;
  }
  std::istringstream head(op.message.substr(0, bar));
  std::string timing;
  head >> stamp.node >> stamp.lagNs >> stamp.serverUs >> timing;
  stamp.serverTimed = timing != "r";
  stamp.caller = op.message.substr(bar + 2);
  return stamp;
}

}  // namespace dlock::nemesis
