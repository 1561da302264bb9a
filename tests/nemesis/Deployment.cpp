// SPDX-License-Identifier: Apache-2.0
#include "Deployment.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace dlock::nemesis {
namespace {

std::vector<std::string> persistenceConfig(Persistence persistence) {
  switch (persistence) {
    case Persistence::none:
      return {};
    case Persistence::appendEverySecond:
      return {"appendonly yes", "appendfsync everysec"};
    case Persistence::appendAlways:
      return {"appendonly yes", "appendfsync always"};
  }
  return {};
}

// The clock-shift library built beside the runner (ClockShift.c).
std::string clockShiftLibrary() {
  const auto self = std::filesystem::read_symlink("/proc/self/exe");
  const auto path = self.parent_path() / "dlock_clock_shift.so";
  if (!std::filesystem::exists(path)) throw std::runtime_error(path.string() + " not found: build dlock_clock_shift");
  return path.string();
}

std::string proxied(const test::LinkProxy& proxy) { return proxy.address(); }

}  // namespace

ServerClock::ServerClock(const std::string& name)
    : file_((std::filesystem::temp_directory_path() /
             ("dlock-nemesis-clock-" + std::to_string(::getpid()) + "-" + name)).string()) {
  set(std::chrono::seconds(0));
}

ServerClock::~ServerClock() {
  std::error_code ignored;
  std::filesystem::remove(file_, ignored);
}

void ServerClock::set(std::chrono::seconds offset) {
  std::ofstream(file_) << (offset.count() < 0 ? "" : "+") << offset.count() << "\n";
  offset_ = offset;
}

std::vector<std::pair<std::string, std::string>> ServerClock::environment() const {
  return {{"LD_PRELOAD", clockShiftLibrary()}, {"DLOCK_CLOCK_SHIFT_FILE", file_}};
}

std::vector<test::LinkProxy*> Deployment::allClientLinks() {
  std::vector<test::LinkProxy*> links;
  for (std::size_t slot = 0; slot < clients_; ++slot) {
    for (test::LinkProxy* link : clientLinks(slot)) links.push_back(link);
  }
  return links;
}

std::string clientQuery() { return "connect_timeout=300ms&command_timeout=300ms&lazy_connect=true"; }

SingleDeployment::SingleDeployment(std::size_t clients, Options options) : Deployment(clients), options_(options) {
  test::RedisProcess::Options server;
  server.config = persistenceConfig(options_.persistence);
  if (options_.fakeClock) {
    clock_ = std::make_unique<ServerClock>("single");
    server.env = clock_->environment();
  }
  server_ = std::make_unique<test::RedisProcess>(server);
  for (std::size_t slot = 0; slot < clients; ++slot) {
    proxies_.push_back(std::make_unique<test::LinkProxy>(server_->host(), server_->port()));
  }
}

std::string SingleDeployment::lockUri(std::size_t slot) const {
  return "redis://" + proxied(*proxies_.at(slot)) + "?" + clientQuery();
}

std::vector<std::string> SingleDeployment::dataAddresses() const {
  return {server_->host() + ":" + std::to_string(server_->port())};
}

void SingleDeployment::heal() {
  if (!server_->running()) server_->restart();
  for (auto& proxy : proxies_) proxy->pass();
}

ServerClock& SingleDeployment::clock() {
  if (clock_ == nullptr) throw std::logic_error("clock() needs a deployment made with fakeClock");
  return *clock_;
}

RedlockDeployment::RedlockDeployment(std::size_t clients, bool fakeClock) : Deployment(clients) {
  for (std::size_t node = 0; node < kNodes; ++node) {
    test::RedisProcess::Options server;
    if (fakeClock) {
      clocks_.push_back(std::make_unique<ServerClock>("redlock-" + std::to_string(node)));
      server.env = clocks_.back()->environment();
    }
    servers_.push_back(std::make_unique<test::RedisProcess>(server));
  }
  proxies_.resize(clients);
  for (auto& links : proxies_) {
    for (auto& server : servers_) links.push_back(std::make_unique<test::LinkProxy>(server->host(), server->port()));
  }
}

std::string RedlockDeployment::lockUri(std::size_t slot) const {
  std::string uri = "redlock://";
  for (std::size_t node = 0; node < kNodes; ++node) uri += (node == 0 ? "" : ",") + proxied(*proxies_.at(slot)[node]);
  return uri + "?node_timeout=300ms&lazy_connect=true";
}

std::vector<std::string> RedlockDeployment::dataAddresses() const {
  std::vector<std::string> addresses;
  for (const auto& server : servers_) addresses.push_back(server->host() + ":" + std::to_string(server->port()));
  return addresses;
}

std::vector<test::LinkProxy*> RedlockDeployment::clientLinks(std::size_t slot) {
  std::vector<test::LinkProxy*> links;
  for (auto& proxy : proxies_.at(slot)) links.push_back(proxy.get());
  return links;
}

std::vector<test::LinkProxy*> RedlockDeployment::nodeLinks(std::size_t node) {
  std::vector<test::LinkProxy*> links;
  for (auto& slot : proxies_) links.push_back(slot.at(node).get());
  return links;
}

ServerClock& RedlockDeployment::clock(std::size_t node) {
  if (clocks_.empty()) throw std::logic_error("clock() needs a deployment made with fakeClock");
  return *clocks_.at(node);
}

void RedlockDeployment::heal() {
  for (auto& server : servers_) {
    if (!server->running()) server->restart();
  }
  for (test::LinkProxy* link : allClientLinks()) link->pass();
}

}  // namespace dlock::nemesis
