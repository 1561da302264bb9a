// SPDX-License-Identifier: Apache-2.0
#include "ReadWriteAccess.h"

#include "dlock/IReadWriteOperator.h"
#include "dlock/LockError.h"

namespace dlock::cli {
namespace {

// The backend's read-write state of `key`; nullopt when it has no read-write locks.
std::optional<dlock::ReadWriteInfo> inspectReadWrite(dlock::IOperator& backend, const std::string& key) {
  auto* rw = dynamic_cast<dlock::IReadWriteOperator*>(&backend);
  if (rw == nullptr) return std::nullopt;
  return rw->inspectReadWrite(key);
}

}  // namespace

std::shared_ptr<dlock::ILock> buildLockFor(const dlock::LockBuilder& builder, const CliOptions& options) {
  if (options.access == Access::Exclusive) return builder.build();
  const std::shared_ptr<dlock::ReadWriteLock> rw = builder.buildReadWrite();
  return options.access == Access::Read ? rw->readLock() : rw->writeLock();
}

std::string readWriteStatusLines(dlock::IOperator& backend, const std::string& key, bool& held) {
  const std::optional<dlock::ReadWriteInfo> info = inspectReadWrite(backend, key);
  if (!info || (!info->writer && info->readers.empty() && info->waiters.empty())) return {};
  held = held || info->writer || !info->readers.empty();
  std::string text = "writer:        " + (info->writer ? formatDuration(info->writer->remaining) : std::string("-")) + "\n";
  text += "readers:       " + std::to_string(info->readers.size());
  for (std::size_t i = 0; i < info->readers.size(); ++i) {
    text += (i == 0 ? " (" : ", ") + formatDuration(info->readers[i].remaining);
  }
  text += info->readers.empty() ? "\n" : ")\n";
  text += "waiters:       " + std::to_string(info->waiters.size());
  for (std::size_t i = 0; i < info->waiters.size(); ++i) {
    text += std::string(i == 0 ? " (" : ", ") + (info->waiters[i].mode == dlock::ReadWriteMode::Read ? "read" : "write");
  }
  text += info->waiters.empty() ? "\n" : ")\n";
  return text;
}

std::string readWriteHolderText(dlock::IOperator& backend, const std::string& key) {
  std::optional<dlock::ReadWriteInfo> info;
  try {
    info = inspectReadWrite(backend, key);
  } catch (const dlock::LockError& error) {
    return "another holder (reading the read-write lock failed: " + std::string(error.what()) + ")";
  }
  if (!info) return "another holder";
  if (info->writer) return "a writer (" + formatDuration(info->writer->remaining) + " left)";
  if (!info->readers.empty()) {
    return std::to_string(info->readers.size()) + " reader(s), and " + std::to_string(info->waiters.size()) +
           " waiter(s) in line";
  }
  return "another holder (free again now)";
}

}  // namespace dlock::cli
