// SPDX-License-Identifier: Apache-2.0
// BenchReport.h — what every benchmark shares: percentiles and one JSON object per line on
// stdout, so scripts/bench can collect results without parsing prose.
#pragma once

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace dlock::bench {

// The p-th percentile (0..100) of `samples`, nearest rank; 0 when empty.
inline double percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 0.0;
  std::sort(samples.begin(), samples.end());
  const auto rank = static_cast<std::size_t>(p / 100.0 * static_cast<double>(samples.size() - 1) + 0.5);
  return samples[std::min(rank, samples.size() - 1)];
}

// A flat JSON object written field by field: JsonLine("uncontended").field("ops", 1.0).print();
class JsonLine {
 public:
  // Ten significant digits: counts in the millions print whole, not as 1.23457e+06.
  explicit JsonLine(const std::string& bench) {
    out_.precision(10);
    out_ << "{\"bench\":\"" << bench << "\"";
  }
  JsonLine& field(const std::string& name, double value) {
    out_ << ",\"" << name << "\":" << value;
    return *this;
  }
  JsonLine& field(const std::string& name, const std::string& value) {
    out_ << ",\"" << name << "\":\"" << value << "\"";
    return *this;
  }
  JsonLine& field(const std::string& name, bool value) {
    out_ << ",\"" << name << "\":" << (value ? "true" : "false");
    return *this;
  }
  void print() {
    out_ << "}";
    std::printf("%s\n", out_.str().c_str());
    std::fflush(stdout);
  }

 private:
  std::ostringstream out_;
};

inline double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// This process's CPU time so far (user + system, every thread), in seconds.
inline double cpuSeconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

}  // namespace dlock::bench
