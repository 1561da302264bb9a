// SPDX-License-Identifier: Apache-2.0
// BrokenShared.h — deliberately broken read-write locks and semaphores for
// `dlock_nemesis_client --primitive rw|sem --broken <variant>`, so that the checks of those
// primitives are seen failing (scripts/nemesis --broken). Test code only: doubles over
// IReadWriteOperator and ISemaphoreOperator that forward every call to the real operator but one
// decision; the library is not changed.
//
//   rw-readers-past-writer  a read is granted whenever only readers hold, whatever waits (a
//                           test-only script adds the reader to the readers' set, as Redisson's
//                           read script does: server side, single server only)
//   rw-release-no-owner-check, sem-release-no-owner-check  a release that finds the hold not ours
//                           releases the hold of whoever holds now (the writer, else every reader;
//                           a permit holder), with that holder's token, and reports released
//   sem-client-clock        permit expiry judged by the client's clock, 10 s ahead of the server's:
//                           before each acquire, every holder whose lease ends within 10 s by the
//                           server's clock is reclaimed (released with its token)
//   sem-wakes-one           a release admits one waiter where more fit (the library's release
//                           script with its admission loop stopped after one, run by a test-only
//                           connection: server side, single server only)
// Owner: one client process. Thread safety: thread-safe, as the wrapped operator.
#pragma once

#include <dlock/IReadWriteOperator.h>
#include <dlock/ISemaphoreOperator.h>

#include <memory>
#include <string>
#include <vector>

namespace dlock::nemesis {

[[nodiscard]] const std::vector<std::string>& brokenSharedVariants();

// `inner` wrapped for `variant`, or `inner` itself when the variant leaves that primitive alone.
// `uri`: the lock server's, for the variants that break the server's side.
[[nodiscard]] std::shared_ptr<IReadWriteOperator> brokenReadWrite(std::shared_ptr<IReadWriteOperator> inner,
                                                                  const std::string& variant, const std::string& uri);
[[nodiscard]] std::shared_ptr<ISemaphoreOperator> brokenSemaphore(std::shared_ptr<ISemaphoreOperator> inner,
                                                                  const std::string& variant, const std::string& uri);

}  // namespace dlock::nemesis
