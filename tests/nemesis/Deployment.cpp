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
    clockFile_ = std::filesystem::temp_directory_path() / ("dlock-nemesis-clock-" + std::to_string(::getpid()));
    std::ofstream(clockFile_) << "+0\n";
    server.env = {{"LD_PRELOAD", clockShiftLibrary()}, {"DLOCK_CLOCK_SHIFT_FILE", clockFile_}};
  }
  server_ = std::make_unique<test::RedisProcess>(server);
  for (std::size_t slot = 0; slot < clients; ++slot) {
    proxies_.push_back(std::make_unique<test::LinkProxy>(server_->host(), server_->port()));
  }
}

SingleDeployment::~SingleDeployment() {
  if (!clockFile_.empty()) std::filesystem::remove(clockFile_);
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

void SingleDeployment::jumpClock(std::chrono::seconds offset) {
  if (clockFile_.empty()) throw std::logic_error("jumpClock needs a deployment made with fakeClock");
  std::ofstream(clockFile_) << (offset.count() < 0 ? "" : "+") << offset.count() << "\n";
  clockOffset_ = offset;
}

RedlockDeployment::RedlockDeployment(std::size_t clients, bool fakeClock) : Deployment(clients) {
  for (std::size_t node = 0; node < kNodes; ++node) {
    test::RedisProcess::Options server;
    if (fakeClock) {
      clockFiles_.push_back(std::filesystem::temp_directory_path() /
                            ("dlock-nemesis-clock-" + std::to_string(::getpid()) + "-" + std::to_string(node)));
      std::ofstream(clockFiles_.back()) << "+0\n";
      server.env = {{"LD_PRELOAD", clockShiftLibrary()}, {"DLOCK_CLOCK_SHIFT_FILE", clockFiles_.back()}};
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

RedlockDeployment::~RedlockDeployment() {
  for (const auto& file : clockFiles_) std::filesystem::remove(file);
}

void RedlockDeployment::jumpClock(std::size_t node, std::chrono::seconds offset) {
  if (clockFiles_.empty()) throw std::logic_error("jumpClock needs a deployment made with fakeClock");
  std::ofstream(clockFiles_.at(node)) << (offset.count() < 0 ? "" : "+") << offset.count() << "\n";
}

void RedlockDeployment::heal() {
  for (const auto& file : clockFiles_) std::ofstream(file) << "+0\n";
  for (auto& server : servers_) {
    if (!server->running()) server->restart();
  }
  for (test::LinkProxy* link : allClientLinks()) link->pass();
}

}  // namespace dlock::nemesis
