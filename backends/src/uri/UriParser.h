// SPDX-License-Identifier: Apache-2.0
// UriParser.h — the generic URI syntax: scheme, userinfo, hosts, path, query, redlock member lists.
// What each scheme takes comes from its UriScheme; a scheme's path reader fails through this.
// Owner: one parseUri() call. Thread safety: not thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/uri.h"
#include "uri/UriRedaction.h"

namespace dlock::detail {

struct UriScheme;

// Parses one URI, or a redlock list and its members, with the masks of the whole text: what an
// error quotes is never a part that redactUri masks.
class UriParser {
 public:
  explicit UriParser(std::string_view whole);

  // Parses `text`, a view into the whole; `member` is its number in the list of `list`, 0 for the whole.
  ParsedUri parse(std::string_view text, std::size_t member, const UriScheme* list = nullptr);

  // Throws ConfigError about the URI being parsed, quoting it redacted.
  [[noreturn]] void fail(const std::string& problem) const;
  // `part` (a view into the whole) in quotes, or '***' when it overlaps what is masked.
  [[nodiscard]] std::string quote(std::string_view part) const;
  // A database number; fails when it is not one.
  [[nodiscard]] int database(std::string_view text) const;

 private:
  [[nodiscard]] std::string redact(std::string_view part) const;
  std::string percentDecode(std::string_view in, const char* what) const;
  Endpoint parseHost(std::string_view text, int defaultPort) const;
  std::vector<Endpoint> parseHosts(std::string_view text, int defaultPort) const;
  void checkValue(const UriOption& option, std::string_view raw, const std::string& value) const;
  void readUserinfo(std::string_view userinfo, ParsedUri& parsed) const;
  // The hosts and path after "scheme://" (the query removed), or a socket-path scheme's path.
  void readLocation(const UriScheme& scheme, std::string_view rest, ParsedUri& parsed) const;

  std::string_view whole_;
  std::vector<Span> spans_;
  std::string redacted_;
  std::size_t member_ = 0;    // the member being parsed, for messages
  std::string_view current_;  // its text
};

}  // namespace dlock::detail
