// SPDX-License-Identifier: Apache-2.0
#include "ElectionRecorder.h"

#include <dlock/LockError.h>

#include <string_view>
#include <utility>

namespace dlock::nemesis {
namespace {

constexpr std::string_view kElectionPrefix = "election:";

IElectionOperator& recordsOf(IOperator& inner) {
  auto* records = dynamic_cast<IElectionOperator*>(&inner);
  if (records == nullptr) throw ConfigError("dlock: " + inner.describe() + " keeps no leader records");
  return *records;
}

}  // namespace

ElectionRecorder::ElectionRecorder(std::shared_ptr<IOperator> inner, Sink sink)
    : ElectionRecorder(std::move(inner), std::move(sink), std::make_shared<std::map<std::uint64_t, std::string>>(),
                       std::make_shared<std::mutex>()) {}

ElectionRecorder::ElectionRecorder(std::shared_ptr<IOperator> inner, Sink sink,
                                   std::shared_ptr<std::map<std::uint64_t, std::string>> owners,
                                   std::shared_ptr<std::mutex> mutex)
    : LeaseRecorder(inner,
                    [sink = std::move(sink), owners, mutex](Op op) {
                      if (op.key.compare(0, kElectionPrefix.size(), kElectionPrefix) == 0) {
                        op.key.erase(0, kElectionPrefix.size());
                      }
                      if (op.op == "lease" && op.token != 0) {
                        const std::lock_guard<std::mutex> guard(*mutex);
                        (*owners)[op.token] = op.message;
                      }
                      sink(std::move(op));
                    }),
      records_(recordsOf(*inner)),
      owners_(std::move(owners)),
      mutex_(std::move(mutex)) {}

std::string ElectionRecorder::ownerOf(std::uint64_t term) const {
  const std::lock_guard<std::mutex> guard(*mutex_);
  const auto found = owners_->find(term);
  return found == owners_->end() ? std::string() : found->second;
}

}  // namespace dlock::nemesis
