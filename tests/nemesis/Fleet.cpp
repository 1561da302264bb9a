// SPDX-License-Identifier: Apache-2.0
#include "Fleet.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace dlock::nemesis {
namespace {

std::string joined(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& part : parts) out += (out.empty() ? "" : ",") + part;
  return out;
}

ClientExit exitOf(const std::string& id, int status) {
  ClientExit exit;
  exit.process = id;
  if (WIFEXITED(status)) exit.exitCode = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) exit.signal = WTERMSIG(status);
  return exit;
}

}  // namespace

Fleet::Fleet(ClientSettings settings, std::size_t size) : settings_(std::move(settings)) {
  for (std::size_t slot = 0; slot < size; ++slot) live_.push_back(start(slot));
}

Fleet::~Fleet() {
  for (auto& client : live_) {
    ::kill(client.pid, SIGCONT);
    ::kill(client.pid, SIGKILL);
    ::waitpid(client.pid, nullptr, 0);
  }
}

Fleet::Client Fleet::start(std::size_t slot) {
  Client client;
  const std::uint64_t number = next_++;
  client.id = "c" + std::to_string(number);
  const std::string history = settings_.historyDirectory + "/" + client.id + ".history";
  const std::string log = settings_.historyDirectory + "/" + client.id + ".log";
  // A safety net only: stop() ends every client with SIGTERM long before this.
  const std::string runMs = std::to_string(3600 * 1000);
  std::vector<std::string> args{settings_.executable,
                                "--uri", settings_.lockUri(slot),
                                "--store", settings_.store,
                                "--id", std::to_string(number),
                                "--keys", joined(settings_.keys),
                                "--seed", std::to_string(settings_.seed * 1000 + number),
                                "--run-ms", runMs,
                                "--lease-ms", std::to_string(settings_.lease.count()),
                                "--acquire-timeout-ms", std::to_string(settings_.acquireTimeout.count()),
                                "--hold-ms", std::to_string(settings_.hold.count()),
                                "--hang-ms", std::to_string(settings_.hangBound.count()),
                                "--history", history,
                                "--control", settings_.historyDirectory + "/" + client.id + ".control"};
  args.insert(args.end(), settings_.extraArguments.begin(), settings_.extraArguments.end());
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  const int error = ::posix_spawn(&client.pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) throw std::runtime_error("cannot start " + settings_.executable + ": " + std::strerror(error));
  return client;
}

bool Fleet::insideSection(std::size_t slot) const {
  std::vector<Op> ops;
  try {
    ops = readHistory(settings_.historyDirectory + "/" + live_.at(slot).id + ".history");
  } catch (const std::exception&) {
    return false;  // not written yet
  }
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    if (it->op == "lost") continue;  // from the watchdog's thread, at any time
    if (it->op == "release") return false;
    if (it->op == "acquire") return it->kind == Kind::Ok;
    if (it->op == "read" || it->op == "write" || it->op == "fenced-write") return true;
    return false;
  }
  return false;
}

std::string Fleet::controlFile(std::size_t slot) const {
  return settings_.historyDirectory + "/" + live_.at(slot).id + ".control";
}

void Fleet::requestHold(std::size_t slot, std::chrono::milliseconds lease, std::chrono::milliseconds max,
                        std::chrono::milliseconds wait, std::uint32_t permits, std::uint32_t resize) {
  const std::string path = controlFile(slot);
  // Written aside and renamed, so the client never reads half a request.
  std::FILE* file = std::fopen((path + ".new").c_str(), "w");
  if (file == nullptr) throw std::runtime_error("cannot write " + path + ".new");
  std::fprintf(file, "%lld %lld %lld %u %u\n", static_cast<long long>(lease.count()),
               static_cast<long long>(max.count()), static_cast<long long>(wait.count()), permits, resize);
  std::fclose(file);
  live_.at(slot).holdRequestedNs = monotonicNs();
  std::remove((path + ".cancel").c_str());  // an earlier request's
  std::rename((path + ".new").c_str(), path.c_str());
}

void Fleet::requestCancel(std::size_t slot) {
  const std::string path = controlFile(slot);
  std::remove(path.c_str());  // taken up already: not to be taken up again once cancelled
  std::FILE* file = std::fopen((path + ".cancel").c_str(), "w");
  if (file == nullptr) throw std::runtime_error("cannot write " + path + ".cancel");
  std::fclose(file);
}

bool Fleet::waitHolding(std::size_t slot, std::chrono::milliseconds budget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<Op> ops;
    try {
      ops = readHistory(settings_.historyDirectory + "/" + live_.at(slot).id + ".history");
    } catch (const std::exception&) {
    }
    for (auto it = ops.rbegin(); it != ops.rend() && it->timeNs >= live_.at(slot).holdRequestedNs; ++it) {
      if (it->op == "release" || it->op == "fenced-write" || it->op == "write") break;  // that hold is over
      if (it->op == "hold-start") return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  endHold(slot);
  return false;
}

std::vector<Op> Fleet::history() const {
  // A record being written may be cut short: the reader drops it, as after a kill.
  return readHistories(settings_.historyDirectory);
}

void Fleet::endHold(std::size_t slot) {
  const std::string path = controlFile(slot);
  std::remove(path.c_str());
  std::remove((path + ".holding").c_str());
  std::remove((path + ".cancel").c_str());
}

void Fleet::pause(std::size_t slot) {
  Client& client = live_.at(slot);
  ::kill(client.pid, SIGSTOP);
  client.paused = true;
}

void Fleet::resume(std::size_t slot) {
  Client& client = live_.at(slot);
  ::kill(client.pid, SIGCONT);
  client.paused = false;
}

void Fleet::kill(std::size_t slot) {
  Client& client = live_.at(slot);
  int status = 0;
  // A client that ended on its own before the kill crashed; the nemesis did not end it.
  const bool endedBefore = ::waitpid(client.pid, &status, WNOHANG) == client.pid;
  const std::int64_t killedNs = monotonicNs();
  if (!endedBefore) {
    ::kill(client.pid, SIGKILL);
    ::waitpid(client.pid, &status, 0);
  }
  ClientExit exit = exitOf(client.id, status);
  exit.killedByNemesis = !endedBefore && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  if (exit.killedByNemesis) exit.killedNs = killedNs;
  ended_.push_back(exit);
  client = start(slot);
}

std::vector<ClientExit> Fleet::stop(std::chrono::steady_clock::time_point deadline) {
  for (auto& client : live_) {
    ::kill(client.pid, SIGCONT);
    ::kill(client.pid, SIGTERM);
  }
  std::vector<ClientExit> exits = ended_;
  for (auto& client : live_) {
    int status = 0;
    bool hung = false;
    while (::waitpid(client.pid, &status, WNOHANG) != client.pid) {
      if (std::chrono::steady_clock::now() >= deadline) {
        hung = true;
        ::kill(client.pid, SIGKILL);
        ::waitpid(client.pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ClientExit exit = exitOf(client.id, status);
    exit.killedAtDeadline = hung;
    exits.push_back(exit);
  }
  live_.clear();
  return exits;
}

}  // namespace dlock::nemesis
