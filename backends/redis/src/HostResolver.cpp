// SPDX-License-Identifier: Apache-2.0
#include "HostResolver.h"

#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>

#include "dlock/LockError.h"

namespace dlock::detail {
namespace {

// One resolution, shared by the caller and the thread that runs it: whichever lets go last frees it.
struct Resolution {
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;         // guarded by mutex
  int status = 0;            // guarded by mutex
  addrinfo* found = nullptr;  // guarded by mutex; owned here until the caller takes it

  Resolution() = default;
  Resolution(const Resolution&) = delete;
  Resolution& operator=(const Resolution&) = delete;
  ~Resolution() {
    if (found != nullptr) ::freeaddrinfo(found);
  }
};

addrinfo streamHints(int flags) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = flags;
  return hints;
}

[[noreturn]] void throwUnresolved(const std::string& address, const std::string& why) {
  throw ConnectionError("dlock: connect to " + address + ": cannot resolve the host: " + why);
}

}  // namespace

ResolvedAddresses resolveHost(const std::string& host, int port, std::chrono::steady_clock::time_point deadline,
                              const std::string& address) {
  const std::string service = std::to_string(port);
  addrinfo* found = nullptr;
  const addrinfo numeric = streamHints(AI_NUMERICHOST);
  const int numericStatus = ::getaddrinfo(host.c_str(), service.c_str(), &numeric, &found);
  if (numericStatus == 0) return ResolvedAddresses(found, ::freeaddrinfo);
  if (numericStatus != EAI_NONAME) throwUnresolved(address, ::gai_strerror(numericStatus));

  auto resolution = std::make_shared<Resolution>();
  try {
    std::thread([resolution, host, service] {
      const addrinfo hints = streamHints(0);
      addrinfo* result = nullptr;
      const int status = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &result);
      const std::lock_guard<std::mutex> guard(resolution->mutex);
      resolution->status = status;
      resolution->found = status == 0 ? result : nullptr;
      resolution->done = true;
      resolution->finished.notify_all();
    }).detach();
  } catch (const std::system_error& error) {
    throwUnresolved(address, std::string("no thread to resolve it on: ") + error.what());
  }
  std::unique_lock<std::mutex> lock(resolution->mutex);
  if (!resolution->finished.wait_until(lock, deadline, [&] { return resolution->done; })) {
    throwUnresolved(address, "no answer within the connect timeout");
  }
  if (resolution->status != 0) throwUnresolved(address, ::gai_strerror(resolution->status));
  found = resolution->found;
  resolution->found = nullptr;
  return ResolvedAddresses(found, ::freeaddrinfo);
}

}  // namespace dlock::detail
