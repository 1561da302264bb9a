// SPDX-License-Identifier: Apache-2.0
#include "dlock/core/Metrics.h"

#include <cstdint>
#include <set>
#include <string_view>

#include "dlock/LockError.h"

namespace dlock {
namespace {

struct Counter {
  const char* name;
  const char* help;
  std::uint64_t LockStats::*value;
};

constexpr Counter kCounters[] = {
    {"dlock_acquisitions_total", "Successful acquisitions; reentrant ones not counted.", &LockStats::acquisitions},
    {"dlock_hand_offs_total", "Acquisitions that followed a wait for a key another owner held.",
     &LockStats::handOffs},
    {"dlock_reentries_total", "Acquisitions of a key the thread already held.", &LockStats::reentries},
    {"dlock_failed_tries_total", "Acquire calls that timed out.", &LockStats::failedTries},
    {"dlock_attempts_total", "Acquire commands sent to the backend, failed ones included.", &LockStats::attempts},
    {"dlock_outage_retries_total", "Attempts retried inside a wait after a connection error.",
     &LockStats::outageRetries},
    {"dlock_renewals_total", "Leases extended by the watchdog.", &LockStats::renewals},
    {"dlock_renewal_round_trips_total", "Watchdog batch calls to the backend.", &LockStats::renewalRoundTrips},
    {"dlock_renewal_failures_total", "Watchdog batches that failed with a backend error.",
     &LockStats::renewalFailures},
    {"dlock_lost_leases_total", "Leases found lost (watchdog, unlock, or local expiry): sections that ran unprotected.",
     &LockStats::lostLeases},
};

constexpr std::string_view kWaitName = "dlock_wait_seconds";
constexpr std::string_view kWaitHelp =
    "Waits of acquire calls that found the key held, until they held it or timed out.";

// A label value: backslash, double quote and line feed escaped, as the format requires.
std::string labelValue(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// Whole milliseconds (never negative: waits are steady-clock spans) as seconds in decimal,
// exactly: "0.025", "30".
std::string seconds(std::int64_t millis) {
  std::string text = std::to_string(millis / 1000);
  if (const std::int64_t fraction = millis % 1000; fraction != 0) {
    std::string digits = std::to_string(fraction);
    digits.insert(0, 3 - digits.size(), '0');
    digits.erase(digits.find_last_not_of('0') + 1);
    text += "." + digits;
  }
  return text;
}

void writeFamily(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

// `labels`: label pairs, escaped, without braces ('lock="orders",side="read"').
void writeSample(std::string& out, std::string_view name, std::string_view labels, std::string_view value) {
  out.append(name).append("{").append(labels).append("} ").append(value).append("\n");
}

std::string lockLabel(const std::string& lock) { return "lock=\"" + lock + "\""; }

void waitHistogram(std::string& out, const std::vector<LockStats>& stats, const std::vector<std::string>& labels) {
  writeFamily(out, kWaitName, "histogram", kWaitHelp);
  const std::string bucket = std::string(kWaitName) + "_bucket";
  for (std::size_t i = 0; i < stats.size(); ++i) {
    const WaitHistogram& waits = stats[i].waits;
    const std::string lock = lockLabel(labels[i]);
    std::uint64_t cumulative = 0;
    for (std::size_t b = 0; b < waits.counts.size(); ++b) {
      cumulative += waits.counts[b];
      const bool last = b == WaitHistogram::kBoundsMillis.size();
      writeSample(out, bucket, lock + ",le=\"" + (last ? "+Inf" : seconds(WaitHistogram::kBoundsMillis[b])) + "\"",
                  std::to_string(cumulative));
    }
    writeSample(out, std::string(kWaitName) + "_sum", lock, seconds(stats[i].waitTime.count()));
    writeSample(out, std::string(kWaitName) + "_count", lock, std::to_string(cumulative));
  }
}

// A lock's gauge: one series, or a read-write lock's two (side="read", side="write").
void lockGauge(std::string& out, std::string_view name, const LockStats& stats, const std::string& label,
               std::uint64_t value, std::uint64_t readValue) {
  if (stats.kind == StatsKind::ReadWrite) {
    writeSample(out, name, lockLabel(label) + ",side=\"read\"", std::to_string(readValue));
    writeSample(out, name, lockLabel(label) + ",side=\"write\"", std::to_string(value));
  } else {
    writeSample(out, name, lockLabel(label), std::to_string(value));
  }
}

void gauges(std::string& out, const std::vector<LockStats>& stats, const std::vector<std::string>& labels) {
  writeFamily(out, "dlock_holds", "gauge",
              "Holds this process has now: thread holds (a reentrant key once) and Leases; a read-write lock's per side.");
  for (std::size_t i = 0; i < stats.size(); ++i) {
    if (stats[i].kind == StatsKind::Semaphore) continue;  // permits, below
    lockGauge(out, "dlock_holds", stats[i], labels[i], stats[i].holds, stats[i].readHolds);
  }
  writeFamily(out, "dlock_waiting_threads", "gauge",
              "Threads of this process waiting now in an acquire call (a one-time try does not wait).");
  for (std::size_t i = 0; i < stats.size(); ++i) {
    lockGauge(out, "dlock_waiting_threads", stats[i], labels[i], stats[i].waiting, stats[i].readWaiting);
  }
  writeFamily(out, "dlock_semaphore_permits_in_use", "gauge", "Permits of the semaphore this process holds now.");
  for (std::size_t i = 0; i < stats.size(); ++i) {
    if (stats[i].kind == StatsKind::Semaphore) {
      writeSample(out, "dlock_semaphore_permits_in_use", lockLabel(labels[i]), std::to_string(stats[i].permitsInUse));
    }
  }
  writeFamily(out, "dlock_semaphore_capacity", "gauge", "The semaphore's capacity, as this process knows it.");
  for (std::size_t i = 0; i < stats.size(); ++i) {
    if (stats[i].kind == StatsKind::Semaphore) {
      writeSample(out, "dlock_semaphore_capacity", lockLabel(labels[i]), std::to_string(stats[i].capacity));
    }
  }
}

}  // namespace

std::string formatMetrics(const std::vector<LockStats>& stats) {
  std::vector<std::string> labels;
  std::set<std::string_view> names;
  for (const LockStats& lock : stats) {
    if (!names.insert(lock.name).second) {
      throw ConfigError("dlock: formatMetrics: two locks are named '" + lock.name +
                        "'; give each its own name with LockBuilder::name (a semaphore: SemaphoreBuilder::name)");
    }
    labels.push_back(labelValue(lock.name));
  }
  std::string out;
  for (const Counter& counter : kCounters) {
    writeFamily(out, counter.name, "counter", counter.help);
    for (std::size_t i = 0; i < stats.size(); ++i) {
      writeSample(out, counter.name, lockLabel(labels[i]), std::to_string(stats[i].*counter.value));
    }
  }
  waitHistogram(out, stats, labels);
  gauges(out, stats, labels);
  return out;
}

std::string formatMetrics(const std::vector<std::shared_ptr<ILock>>& locks) {
  std::vector<LockStats> stats;
  stats.reserve(locks.size());
  for (const auto& lock : locks) stats.push_back(lock->stats());
  return formatMetrics(stats);
}

std::string formatMetrics(const ILock& lock) { return formatMetrics(std::vector<LockStats>{lock.stats()}); }

std::string formatMetrics(const ReadWriteLock& lock) { return formatMetrics(*lock.readLock()); }

std::string formatMetrics(const Semaphore& semaphore) {
  return formatMetrics(std::vector<LockStats>{semaphore.stats()});
}

}  // namespace dlock
