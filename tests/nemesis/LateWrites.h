// SPDX-License-Identifier: Apache-2.0
// LateWrites.h — part of check 11, from the server's own record (ServerObserver.h): no write of a
// lock key or its queue by a call that reached the server after the deadline it carried.
//
// A script call that must not act once its caller stopped waiting (an acquire, a queue join, a
// re-take) carries, as its last argument, the moment after which the server refuses it, in the
// server's milliseconds (Scripts.h: `refuseAfter`, from the offset the replies show). The record
// names each write's call and the server's stamps of both (MONITOR shows the call before the
// commands it runs, and the script's TIME is no earlier than the call's stamp): a write whose
// call the server stamped after that moment is one the server should have refused. Exact: no
// allowance, the two times are the same server clock's. A last argument is taken as a deadline
// when it is 13 digits within a day of the call's own stamp (no other argument dlock sends is).
// Plain functions over values; thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "History.h"

namespace dlock::nemesis {

struct LateWritesResult {
  long long bounded = 0;  // writes by calls that carried a deadline
  long long late = 0;     // ... whose call came after it
  std::string first;      // the first late write, described
};

[[nodiscard]] LateWritesResult checkLateWrites(const std::vector<Op>& history);

}  // namespace dlock::nemesis
