// SPDX-License-Identifier: Apache-2.0
// ElectionScripts.h — the Lua scripts of an election's leader record (IElectionOperator) beside
// the fair lock of its key (FairScripts.h). KEYS share the key's hash tag (KeyNames): the lock
// and the record, a hash {token, term, seq, value}.
//
//   electionProclaim  KEYS: lock, record   ARGV: token, term, value, record-ttl-ms, channel
//                     → 1 written (the record's seq + 1 when the term is new to it); 0 the key is
//                       not the token's, or a later term is recorded
//   electionRead      KEYS: lock, record   → {owner or "", PTTL, token, term, seq, value}
//   electionAnnounce  KEYS: lock           ARGV: channel → the PUBLISH's receivers
//
// Terms are fencing tokens, compared as text of digits (exact in 64 bits, where Lua's numbers
// are doubles). The proclaim publishes the term on the channel after writing (subscribers hear
// it once the script has run); its record lives as long as the fencing counter. The proclaim
// refuses to run late (makeBoundScript): a value its caller gave up on is never written after.
#pragma once

#include "Scripts.h"

namespace dlock::detail {

const Script& electionProclaimScript(bool sharded);
const Script& electionReadScript();
const Script& electionAnnounceScript(bool sharded);

}  // namespace dlock::detail
