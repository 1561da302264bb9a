// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dlock/core/Token.h"

TEST_SUITE("Token") {
  TEST_CASE("a token is 32 lowercase hex digits (128 bits)") {
    const std::string token = dlock::generateToken();
    CHECK(token.size() == 32);
    CHECK(std::all_of(token.begin(), token.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }));
  }

  TEST_CASE("200000 tokens from 4 threads are all distinct") {
    std::mutex mutex;
    std::set<std::string> all;
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        std::vector<std::string> mine;
        for (int i = 0; i < 50000; ++i) mine.push_back(dlock::generateToken());
        std::lock_guard<std::mutex> guard(mutex);
        all.insert(mine.begin(), mine.end());
      });
    }
    for (auto& thread : threads) thread.join();
    CHECK(all.size() == 200000);
  }

  TEST_CASE("every hex digit appears at every position about equally often") {
    std::vector<std::array<int, 16>> counts(32, std::array<int, 16>{});
    constexpr int kSamples = 16000;
    for (int i = 0; i < kSamples; ++i) {
      const std::string token = dlock::generateToken();
      for (std::size_t p = 0; p < token.size(); ++p) {
        const char c = token[p];
        ++counts[p][static_cast<std::size_t>(c <= '9' ? c - '0' : c - 'a' + 10)];
      }
    }
    for (const auto& position : counts) {
      for (int count : position) {  // expected 1000 each; 6 sigma is about +-190
        CHECK(count > 800);
        CHECK(count < 1200);
      }
    }
  }

  TEST_CASE("tokens from 4 processes (100000 in all) are all distinct") {
    (void)dlock::generateToken();  // a partly used random block the children inherit
    std::vector<std::pair<pid_t, int>> children;
    for (int c = 0; c < 4; ++c) {
      int fds[2];
      REQUIRE(pipe(fds) == 0);
      const pid_t child = fork();
      REQUIRE(child >= 0);
      if (child == 0) {
        close(fds[0]);
        std::string all;
        for (int i = 0; i < 25000; ++i) all += dlock::generateToken();
        std::size_t written = 0;
        while (written < all.size()) {
          const ssize_t n = write(fds[1], all.data() + written, all.size() - written);
          if (n <= 0) _exit(1);
          written += static_cast<std::size_t>(n);
        }
        _exit(0);
      }
      close(fds[1]);
      children.emplace_back(child, fds[0]);
    }
    std::set<std::string> seen;
    for (const auto& [child, fd] : children) {
      std::string data;
      char buffer[65536];
      ssize_t n = 0;
      while ((n = read(fd, buffer, sizeof buffer)) > 0) data.append(buffer, static_cast<std::size_t>(n));
      close(fd);
      int status = 0;
      waitpid(child, &status, 0);
      CHECK(data.size() == 25000U * 32U);
      for (std::size_t i = 0; i + 32 <= data.size(); i += 32) seen.insert(data.substr(i, 32));
    }
    CHECK(seen.size() == 100000);
  }

  TEST_CASE("a forked child never repeats its parent's tokens") {
    (void)dlock::generateToken();  // the parent has a partly used random block
    int pipeFds[2];
    REQUIRE(pipe(pipeFds) == 0);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      const std::string token = dlock::generateToken();
      (void)!write(pipeFds[1], token.data(), token.size());
      _exit(0);
    }
    close(pipeFds[1]);
    const std::string parentToken = dlock::generateToken();
    char buffer[32];
    std::size_t got = 0;
    while (got < sizeof buffer) {
      const ssize_t n = read(pipeFds[0], buffer + got, sizeof buffer - got);
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    close(pipeFds[0]);
    int status = 0;
    waitpid(child, &status, 0);
    REQUIRE(got == sizeof buffer);
    CHECK(std::string(buffer, got) != parentToken);
  }
}
