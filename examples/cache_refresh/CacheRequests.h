// SPDX-License-Identifier: Apache-2.0
// CacheRequests.h — what both cache-refresh programs do around their requests: send them from
// threads released together (each with its own connection), and read the command line.
#pragma once

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "../common/AppRedis.h"
#include "../common/StartGate.h"

namespace examples {

// One thread per entry of `results`, released together: `handle(redis, request)` returns what the
// request served; an exception marks it `failed` with its message. A Request has `served`,
// `error`, and the steady-clock `start` and `end` set here.
template <class Request, class Served, class Handle>
void sendTogether(const std::string& uri, std::vector<Request>& results, Served failed, Handle handle) {
  StartGate gate(static_cast<int>(results.size()));
  std::vector<std::thread> threads;
  for (auto& result : results) {
    threads.emplace_back([&, out = &result] {
      bool arrived = false;
      try {
        AppRedis redis(uri);  // one connection per thread: a redisContext is not thread-safe
        gate.arriveAndWait();
        arrived = true;
        out->start = std::chrono::steady_clock::now();
        out->served = handle(redis, *out);
      } catch (const std::exception& error) {
        out->served = failed;
        out->error = error.what();
        if (!arrived) gate.arriveAndWait();  // the others must not wait for this one forever
      }
      out->end = std::chrono::steady_clock::now();
    });
  }
  for (auto& thread : threads) thread.join();
}

using CacheRun = int (*)(const std::string& uri, int requests, std::chrono::milliseconds rebuildTime,
                         const std::string& name);

// main() of a cache program: [--requests 16] [--rebuild-ms 500] [--name daily-report] --uri.
inline int cacheMain(int argc, char** argv, const std::string& program, CacheRun run) {
  try {
    const CommandLine args(argc, argv);
    if (!args.mode().empty()) throw UsageError("unexpected argument " + args.mode());
    return run(args.uri(), args.number("requests", 16), std::chrono::milliseconds(args.number("rebuild-ms", 500)),
               args.text("name", "daily-report"));
  } catch (const UsageError& error) {
    const std::string usage = "usage: " + program + " ";
    std::fprintf(stderr, "%s: %s\n%s[--requests 16] [--rebuild-ms 500] [--name daily-report]\n%s--uri redis://HOST:PORT (or DLOCK_URI)\n",
                 program.c_str(), error.what(), usage.c_str(), std::string(usage.size(), ' ').c_str());
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), error.what());
    return 1;
  }
}

}  // namespace examples
