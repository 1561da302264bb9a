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

std::optional<ReadWriteStatus> readWriteStatus(dlock::IOperator& backend, const std::string& key) {
  const std::optional<dlock::ReadWriteInfo> info = inspectReadWrite(backend, key);
  if (!info || (!info->writer && info->readers.empty() && info->waiters.empty())) return std::nullopt;
  ReadWriteStatus status;
  status.held = info->writer || !info->readers.empty();
  std::string& text = status.text;
  text += "held:          ";
  text += info->writer ? "yes, by the writer\n"
          : status.held ? "yes, by " + std::to_string(info->readers.size()) + " reader(s)\n"
                        : std::string("no\n");
  text += "fencing token: " + std::to_string(info->fencingToken) + (info->writer ? "\n" : " (the last writer's)\n");
  if (info->writer) {
    text += "writer:        token " + tokenPrefix(info->writer->token) + ", " + formatDuration(info->writer->remaining) + " left\n";
  } else {
    text += "writer:        -\n";
  }
  text += "readers:       " + std::to_string(info->readers.size()) + "\n";
  for (const auto& reader : info->readers) {
    text += "  token " + tokenPrefix(reader.token) + ", " + formatDuration(reader.remaining) + " left\n";
  }
  text += "waiters:       " + std::to_string(info->waiters.size()) + "\n";
  for (const auto& waiter : info->waiters) {
    text += std::string("  ") + (waiter.mode == dlock::ReadWriteMode::Read ? "read" : "write") + ", token " +
            tokenPrefix(waiter.token) + "\n";
  }
  return status;
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
