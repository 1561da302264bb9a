// SPDX-License-Identifier: Apache-2.0
// memory_cycle — uncontended lock+unlock cycles per second on one thread, memory backend.
// Usage: dlock_bench_memory_cycle [seconds]
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "BenchReport.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/memory/MemoryOperator.h"

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
  auto lock = dlock::LockBuilder()
                  .backend(std::make_shared<dlock::MemoryOperator>())
                  .leaseTime(std::chrono::seconds(30))
                  .build();
  const std::string key = "bench:memory";
  // Warm up: allocations, the thread-local holder, the token block.
  for (int i = 0; i < 10000; ++i) {
    lock->lock(key);
    lock->unlock(key);
  }
  std::vector<double> samples;
  samples.reserve(1 << 20);
  long long cycles = 0;
  const auto start = std::chrono::steady_clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    for (int i = 0; i < 1000; ++i) {
      // One cycle in 64 timed: a clock read costs a tenth of a cycle here.
      const bool sampled = (cycles & 63) == 0;
      const auto t0 = sampled ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
      lock->lock(key);
      lock->unlock(key);
      if (sampled) {
        samples.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      }
      ++cycles;
    }
  }
  const double elapsed = dlock::bench::secondsSince(start);
  dlock::bench::JsonLine("memory_cycle")
      .field("cycles", static_cast<double>(cycles))
      .field("seconds", elapsed)
      .field("cycles_per_s", static_cast<double>(cycles) / elapsed)
      .field("p50_us", dlock::bench::percentile(samples, 50))
      .field("p99_us", dlock::bench::percentile(samples, 99))
      .print();
  return 0;
}
