// SPDX-License-Identifier: Apache-2.0
#include "History.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <type_traits>

namespace dlock::nemesis {
namespace {

constexpr std::size_t kFields = 9;
constexpr const char* kHeader = "#dlock-history v1\n";

void appendEscaped(std::string& out, std::string_view field) {
  for (const char c : field) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      default: out += c;
    }
  }
}

std::string unescape(std::string_view field) {
  std::string out;
  out.reserve(field.size());
  for (std::size_t i = 0; i < field.size(); ++i) {
    if (field[i] != '\\') {
      out += field[i];
      continue;
    }
    if (++i == field.size()) throw std::runtime_error("history: a field ends with a lone '\\'");
    switch (field[i]) {
      case '\\': out += '\\'; break;
      case 't': out += '\t'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      default: throw std::runtime_error(std::string("history: unknown escape '\\") + field[i] + "'");
    }
  }
  return out;
}

Kind parseKind(std::string_view text) {
  if (text == "invoke") return Kind::Invoke;
  if (text == "ok") return Kind::Ok;
  if (text == "fail") return Kind::Fail;
  if (text == "info") return Kind::Info;
  throw std::runtime_error("history: unknown kind '" + std::string(text) + "'");
}

template <typename Int>
Int parseInt(std::string_view text, const char* what) {
  if (text.empty()) return 0;
  std::size_t used = 0;
  const std::string copy(text);
  try {
    Int value{};
    if constexpr (std::is_signed_v<Int>) {
      value = static_cast<Int>(std::stoll(copy, &used));
    } else {
      if (copy.front() == '-') throw std::invalid_argument("negative");
      value = static_cast<Int>(std::stoull(copy, &used));
    }
    if (used == copy.size()) return value;
  } catch (const std::logic_error&) {
  }
  throw std::runtime_error(std::string("history: bad ") + what + " '" + copy + "'");
}

}  // namespace

std::string_view kindName(Kind kind) noexcept {
  switch (kind) {
    case Kind::Invoke: return "invoke";
    case Kind::Ok: return "ok";
    case Kind::Fail: return "fail";
    case Kind::Info: return "info";
  }
  return "info";
}

std::int64_t monotonicNs() noexcept {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

std::string formatLine(const Op& op) {
  std::string line;
  line.reserve(64 + op.message.size());
  const auto field = [&line](std::string_view text, bool last = false) {
    appendEscaped(line, text);
    if (!last) line += '\t';
  };
  field(op.process);
  field(kindName(op.kind));
  field(op.op);
  field(op.key);
  field(std::to_string(op.token));
  field(op.value);
  field(std::to_string(op.timeNs));
  field(op.errorType);
  field(op.message, true);
  return line;
}

Op parseLine(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  while (true) {
    const auto tab = line.find('\t', start);
    fields.push_back(line.substr(start, tab == std::string_view::npos ? std::string_view::npos : tab - start));
    if (tab == std::string_view::npos) break;
    start = tab + 1;
  }
  if (fields.size() != kFields) {
    throw std::runtime_error("history: " + std::to_string(fields.size()) + " fields, not " + std::to_string(kFields) +
                             ", in '" + std::string(line.substr(0, 200)) + "'");
  }
  Op op;
  op.process = unescape(fields[0]);
  op.kind = parseKind(fields[1]);
  op.op = unescape(fields[2]);
  op.key = unescape(fields[3]);
  op.token = parseInt<std::uint64_t>(fields[4], "token");
  op.value = unescape(fields[5]);
  op.timeNs = parseInt<std::int64_t>(fields[6], "time");
  op.errorType = unescape(fields[7]);
  op.message = unescape(fields[8]);
  return op;
}

HistoryWriter::HistoryWriter(const std::string& path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("history: cannot open " + path + ": " + std::strerror(errno));
  // The header only on a new file: a restarted process appends to its old history.
  if (::lseek(fd_, 0, SEEK_END) == 0) writeAll(kHeader);
}

HistoryWriter::~HistoryWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void HistoryWriter::append(Op op) noexcept {
  try {
    const std::lock_guard<std::mutex> guard(mutex_);
    if (op.timeNs == 0) op.timeNs = monotonicNs();
    std::string line = formatLine(op);
    line += '\n';
    writeAll(line);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "history: record not written: %s\n", error.what());
  }
}

void HistoryWriter::writeAll(const std::string& line) noexcept {
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::fprintf(stderr, "history: write failed: %s\n", std::strerror(errno));
      return;
    }
    done += static_cast<std::size_t>(n);
  }
}

std::vector<Op> readHistory(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("history: cannot read " + path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  std::vector<Op> ops;
  std::size_t start = 0;
  while (start < text.size()) {
    const auto end = text.find('\n', start);
    if (end == std::string::npos) break;  // cut short by a kill: the record never completed
    const std::string_view line(text.data() + start, end - start);
    if (!line.empty() && line.front() != '#') ops.push_back(parseLine(line));
    start = end + 1;
  }
  return ops;
}

std::vector<Op> readHistories(const std::string& directory) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(directory)) {
    if (entry.is_regular_file() && entry.path().extension() == ".history") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  std::vector<Op> all;
  for (const auto& file : files) {
    auto ops = readHistory(file);
    all.insert(all.end(), std::make_move_iterator(ops.begin()), std::make_move_iterator(ops.end()));
  }
  return all;
}

}  // namespace dlock::nemesis
