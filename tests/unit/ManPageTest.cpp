// SPDX-License-Identifier: Apache-2.0
// dlock(1), tools/dlock/dlock.1, against `dlock --help` (helpText()): the page names every option,
// subcommand and exit status the help names, and no option the help does not, so a changed
// command line cannot ship with a stale manual.
#include <doctest/doctest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "tools/dlock/CliArgs.h"

namespace {

std::string readManPage() {
  std::ifstream in(DLOCK_MAN_PAGE);
  REQUIRE_MESSAGE(in, "cannot read " DLOCK_MAN_PAGE);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string replaceAll(std::string text, const std::string& from, const std::string& to) {
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// The page's words as a reader sees them: roff's minus `\-` as '-', font changes dropped,
// comment lines left out.
std::string plainText(const std::string& roff) {
  std::istringstream lines(roff);
  std::string text;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(".\\\"", 0) == 0) continue;
    text += std::regex_replace(replaceAll(line, "\\-", "-"), std::regex(R"(\\f[BIRP])"), "") + "\n";
  }
  return text;
}

// Every option spelled in `text`: "--name" or "-x" standing as a word of its own (not the "-write"
// of "read-write", nor the "--" before COMMAND).
std::set<std::string> optionsIn(const std::string& text) {
  static const std::regex option(R"((?:^|[\s(\[,|])(--?[A-Za-z][A-Za-z0-9-]*))");
  std::set<std::string> found;
  for (std::sregex_iterator it(text.begin(), text.end(), option), end; it != end; ++it) found.insert((*it)[1]);
  return found;
}

// The text from the line starting with `from` to the line starting with `to` (or the end).
std::string section(const std::string& text, const std::string& from, const std::string& to) {
  const auto start = text.find("\n" + from);
  if (start == std::string::npos) return "";
  const auto stop = text.find("\n" + to, start + 1);
  return text.substr(start, stop == std::string::npos ? std::string::npos : stop - start);
}

std::string joined(const std::set<std::string>& words) {
  std::string text;
  for (const auto& word : words) text += (text.empty() ? "" : " ") + word;
  return text;
}

std::set<std::string> matches(const std::string& text, const std::regex& pattern) {
  std::set<std::string> found;
  for (std::sregex_iterator it(text.begin(), text.end(), pattern), end; it != end; ++it) found.insert((*it)[1]);
  return found;
}

// The statuses the help's table gives: "  2    bad arguments", "126  ...; 127 COMMAND not found".
std::set<std::string> helpExitStatuses() {
  return matches(section(dlock::cli::helpText(), "Exit status", "Examples:"),
                 std::regex(R"((?:\n +|; )([0-9]+) )"));
}

// The page's: each `.B N` paragraph under EXIT STATUS.
std::set<std::string> pageExitStatuses() {
  return matches(section(readManPage(), ".SH \"EXIT STATUS\"", ".SH "), std::regex(R"(\n\.B ([0-9]+)\n)"));
}

}  // namespace

TEST_SUITE("ManPage") {
  TEST_CASE("the option scan finds each option a help line spells, and nothing inside a word") {
    CHECK(optionsIn("  -n, --no-wait   give up\n      --resize N (--read, --write)\n") ==
          std::set<std::string>{"-n", "--no-wait", "--resize", "--read", "--write"});
    CHECK(optionsIn("a read-write lock, set-user-ID, dlock -- COMMAND, or - when free").empty());
    CHECK(plainText(".BR \\-w \", \" \\-\\-wait \" \\fID\\fR\"\n.\\\" --comment\n") == ".BR -w \", \" --wait \" D\"\n");
  }

  TEST_CASE("dlock(1) names every option dlock --help names") {
    const auto page = optionsIn(plainText(readManPage()));
    const auto help = optionsIn(dlock::cli::helpText());
    REQUIRE(help.count("--uri") == 1);  // the scan read the help
    for (const auto& option : help) {
      CHECK_MESSAGE(page.count(option) == 1, option, " is in dlock --help but not in tools/dlock/dlock.1");
    }
  }

  TEST_CASE("dlock(1) names no option that dlock --help does not") {
    const auto help = optionsIn(dlock::cli::helpText());
    for (const auto& option : optionsIn(plainText(readManPage()))) {
      CHECK_MESSAGE(help.count(option) == 1, option, " is in tools/dlock/dlock.1 but not in dlock --help");
    }
  }

  TEST_CASE("dlock(1) lists every exit status dlock --help lists") {
    const auto help = helpExitStatuses();
    CHECK(joined(help) == "1 125 126 127 2 3");  // the scan read the table
    CHECK(joined(pageExitStatuses()) == joined(help));
  }

  TEST_CASE("dlock(1) shows the status subcommand, the environment and the examples of dlock --help") {
    const auto page = plainText(readManPage());
    CHECK(page.find(".SH SYNOPSIS") != std::string::npos);
    CHECK(page.find(".SH \"THE STATUS COMMAND\"\n.B dlock status\n.I KEY") != std::string::npos);
    CHECK(page.find(".B DLOCK_URI") != std::string::npos);
    const std::string help = dlock::cli::helpText();
    REQUIRE(help.find("\nExamples:\n") != std::string::npos);
    std::istringstream examples(help.substr(help.find("\nExamples:\n")));
    int commands = 0;
    for (std::string line; std::getline(examples, line);) {
      if (line.rfind("  ", 0) != 0 || line.find("  #") == 0) continue;  // the commands, not their comments
      ++commands;
      CHECK_MESSAGE(page.find(line.substr(2)) != std::string::npos, "example not in dlock(1): ", line);
    }
    CHECK(commands == 8);  // the scan read them all
  }

  TEST_CASE("dlock(1) has a section for each subcommand the help names") {
    const auto page = plainText(readManPage());
    for (const char* section : {".SH \"THE STATUS COMMAND\"", ".SH \"THE LEADER COMMAND\"", ".SH \"THE RESIZE COMMAND\""}) {
      CHECK_MESSAGE(page.find(section) != std::string::npos, section);
    }
  }
}
