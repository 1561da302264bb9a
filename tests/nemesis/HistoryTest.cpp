// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "History.h"

using dlock::nemesis::Kind;
using dlock::nemesis::Op;

namespace {

// A fresh directory under the temporary directory, removed with its files.
struct ScratchDir {
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "dlock-history-XXXXXX").string();
    path = mkdtemp(pattern.data());
  }
  ~ScratchDir() { std::filesystem::remove_all(path); }
  std::string path;
};

Op sample() {
  Op op;
  op.process = "c3";
  op.kind = Kind::Fail;
  op.op = "release";
  op.key = "orders\t{42}\\";
  op.token = 18446744073709551615ULL;
  op.value = "line\nbreak\r";
  op.timeNs = 1234567890123;
  op.errorType = "LockLostError";
  op.message = "dlock: unlock 'orders:42'\ton 127.0.0.1:6379: lost\\n";
  return op;
}

void checkSame(const Op& a, const Op& b) {
  CHECK(a.process == b.process);
  CHECK(a.kind == b.kind);
  CHECK(a.op == b.op);
  CHECK(a.key == b.key);
  CHECK(a.token == b.token);
  CHECK(a.value == b.value);
  CHECK(a.timeNs == b.timeNs);
  CHECK(a.errorType == b.errorType);
  CHECK(a.message == b.message);
}

}  // namespace

TEST_SUITE("History") {
  TEST_CASE("a record with tabs, newlines and backslashes in its fields reads back the same") {
    const std::string line = dlock::nemesis::formatLine(sample());
    CHECK(line.find('\n') == std::string::npos);
    CHECK(std::count(line.begin(), line.end(), '\t') == 8);
    checkSame(dlock::nemesis::parseLine(line), sample());
  }

  TEST_CASE("a file written record by record reads back without its truncated last line") {
    ScratchDir dir;
    const std::string path = dir.path + "/c3.history";
    {
      dlock::nemesis::HistoryWriter writer(path);
      writer.append(sample());
      Op second = sample();
      second.kind = Kind::Ok;
      second.timeNs = 0;  // stamped on append
      writer.append(second);
    }
    std::ofstream(path, std::ios::app) << "c3\tinvoke\tacquire\tk\t0";  // a kill mid-write
    const auto ops = dlock::nemesis::readHistory(path);
    REQUIRE(ops.size() == 2);
    checkSame(ops[0], sample());
    CHECK(ops[1].kind == Kind::Ok);
    CHECK(ops[1].timeNs > 0);
  }

  TEST_CASE("readHistories reads every history file of a directory") {
    ScratchDir dir;
    for (const char* name : {"c1", "c2", "nemesis"}) {
      dlock::nemesis::HistoryWriter writer(dir.path + "/" + name + ".history");
      Op op;
      op.process = name;
      writer.append(op);
    }
    std::ofstream(dir.path + "/report.json") << "{}";
    const auto ops = dlock::nemesis::readHistories(dir.path);
    REQUIRE(ops.size() == 3);
    CHECK(ops[2].process == "nemesis");
  }

  TEST_CASE("a complete line with the wrong number of fields is an error") {
    CHECK_THROWS_AS((void)dlock::nemesis::parseLine("c1\tok\tacquire"), std::runtime_error);
    CHECK_THROWS_AS((void)dlock::nemesis::parseLine("c1\tmaybe\tacquire\tk\t0\t\t1\t\t"), std::runtime_error);
    CHECK_THROWS_AS((void)dlock::nemesis::parseLine("c1\tok\tacquire\tk\t-1\t\t1\t\t"), std::runtime_error);
  }
}
