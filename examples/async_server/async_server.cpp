// SPDX-License-Identifier: Apache-2.0
// async_server — an Asio TCP server on one thread serving many concurrent requests, each taking a
// per-request lock with co_await dlock::asio::async_acquire: a request waiting for its account's
// lock holds no thread, so one thread serves them all, and the lock is held across an await.
//
// Each request names an account; the server takes "account:<id>", reads the account's balance,
// awaits a (simulated) storage write, writes balance + 1, releases, and answers "ok <fencing token>".
// The program is its own load: `--requests` clients connect at once over loopback, spread over
// `--accounts` accounts. Without the lock the read-await-write would lose updates. With
// `--together`, requests are served only once all have arrived, so every one of them waits for its
// account at the same time (all in flight at once, whatever the machine's speed).
// Usage: dlock_example_async_server --uri redis://127.0.0.1:6379 [--requests 1000] [--accounts 10] [--together]
// Prints: RESULT requests=N answered=N balance_total=N peak_in_flight=K threads=T
#include <dirent.h>

#include <asio.hpp>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "dlock/asio.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"

using asio::ip::tcp;
using namespace std::chrono_literals;

namespace {

struct Service {
  dlock::ILock& lock;
  asio::steady_timer& allArrived;        // --together: expires never, cancelled once all arrived
  bool together = false;
  bool arrived = false;                  // --together: every request has been accepted
  std::map<std::string, long> balances;  // the one thread's: no mutex
  int inFlight = 0;
  int peakInFlight = 0;
  int answered = 0;
};

asio::awaitable<void> serve(tcp::socket socket, Service& service) {
  ++service.inFlight;
  service.peakInFlight = std::max(service.peakInFlight, service.inFlight);
  std::string line;
  co_await asio::async_read_until(socket, asio::dynamic_buffer(line), '\n', asio::use_awaitable);
  const std::string account = line.substr(0, line.find('\n'));
  if (service.together && !service.arrived) {
    std::error_code cancelled;  // the timer's end: every request has arrived
    co_await service.allArrived.async_wait(asio::redirect_error(asio::use_awaitable, cancelled));
  }
  dlock::AcquireOptions options;
  options.waitTime = 30s;
  dlock::Lease lease =
      co_await dlock::asio::async_acquire(service.lock, "account:" + account, options, asio::use_awaitable);
  std::string reply = "busy\n";
  if (lease) {
    const long before = service.balances[account];
    asio::steady_timer storage(socket.get_executor(), 1ms);  // the write's round trip: others run meanwhile
    co_await storage.async_wait(asio::use_awaitable);
    service.balances[account] = before + 1;
    reply = "ok " + std::to_string(lease.fencingToken()) + "\n";
    lease.release();
  }
  co_await asio::async_write(socket, asio::buffer(reply), asio::use_awaitable);
  --service.inFlight;
}

asio::awaitable<void> accept(tcp::acceptor& acceptor, Service& service, int requests) {
  for (int i = 0; i < requests; ++i) {
    tcp::socket socket = co_await acceptor.async_accept(asio::use_awaitable);
    asio::co_spawn(acceptor.get_executor(), serve(std::move(socket), service), asio::detached);
  }
  service.arrived = true;  // a request read later does not wait
  service.allArrived.cancel();
}

asio::awaitable<void> request(tcp::endpoint server, std::string account, Service& service) {
  tcp::socket socket(co_await asio::this_coro::executor);
  co_await socket.async_connect(server, asio::use_awaitable);
  const std::string line = account + "\n";
  co_await asio::async_write(socket, asio::buffer(line), asio::use_awaitable);
  std::string reply;
  co_await asio::async_read_until(socket, asio::dynamic_buffer(reply), '\n', asio::use_awaitable);
  if (reply.rfind("ok ", 0) == 0) ++service.answered;
}

int threadCount() {
  int count = 0;
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr) return 0;
  while (const dirent* entry = ::readdir(tasks)) count += entry->d_name[0] != '.' ? 1 : 0;
  ::closedir(tasks);
  return count;
}

}  // namespace

int main(int argc, char** argv) {
  std::string uri;
  int requests = 1000;
  int accounts = 10;
  bool together = false;
  bool bad = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--together") {
      together = true;
      continue;
    }
    if (i + 1 >= argc) {
      bad = true;
      break;
    }
    const char* value = argv[++i];
    if (flag == "--uri") {
      uri = value;
    } else if (flag == "--requests") {
      requests = std::atoi(value);
    } else if (flag == "--accounts") {
      accounts = std::atoi(value);
    } else {
      bad = true;
    }
  }
  if (bad || uri.empty() || requests <= 0 || accounts <= 0) {
    std::fprintf(stderr, "usage: %s --uri URI [--requests N] [--accounts N] [--together]\n", argv[0]);
    return 2;
  }
  try {
    auto lock = dlock::LockBuilder().backend(dlock::connect(uri)).build();
    asio::io_context io(1);
    asio::steady_timer allArrived(io, asio::steady_timer::time_point::max());
    Service service{*lock, allArrived, together, false, {}, 0, 0, 0};
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0), true);
    acceptor.listen(asio::socket_base::max_listen_connections);
    asio::co_spawn(io, accept(acceptor, service, requests), asio::detached);
    for (int i = 0; i < requests; ++i) {
      asio::co_spawn(io, request(acceptor.local_endpoint(), std::to_string(i % accounts), service), asio::detached);
    }
    io.run();  // the one thread: returns when every request was answered
    long total = 0;
    for (const auto& entry : service.balances) total += entry.second;
    std::printf("RESULT requests=%d answered=%d balance_total=%ld peak_in_flight=%d threads=%d\n", requests,
                service.answered, total, service.peakInFlight, threadCount());
    return service.answered == requests && total == requests ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "async_server: %s\n", error.what());
    return 1;
  }
}
