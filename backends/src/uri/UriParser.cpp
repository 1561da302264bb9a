// SPDX-License-Identifier: Apache-2.0
#include "uri/UriParser.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <functional>
#include <optional>
#include <utility>

#include "dlock/LockError.h"
#include "dlock/duration.h"
#include "uri/UriScheme.h"

namespace dlock {
namespace detail {
namespace {

bool parseInt(std::string_view text, long long& value) {
  if (text.empty()) return false;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return ec == std::errc() && ptr == end;
}

// A host as a URI names it: a DNS name or an IPv4 address (letters, digits, '-', '.', '_'), or,
// `bracketed`, an IPv6 address. Anything else would reach getaddrinfo as something it is not: a NUL
// byte ends the name there, so "good<NUL>.evil" would connect to "good".
std::optional<char> badHostCharacter(std::string_view name, bool bracketed) {
  for (const char c : name) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    const bool hexDigit = std::isxdigit(static_cast<unsigned char>(c)) != 0;
    const bool allowed = bracketed ? hexDigit || c == ':' || c == '.' : alnum || c == '-' || c == '.' || c == '_';
    if (!allowed) return c;
  }
  return std::nullopt;
}

// `c` for a message: itself, quoted, when printable, else its byte value.
std::string shownCharacter(char c) {
  const auto byte = static_cast<unsigned char>(c);
  if (byte > 0x20 && byte < 0x7f) return std::string("'") + c + "'";
  static constexpr char kHex[] = "0123456789abcdef";
  return std::string("byte 0x") + kHex[byte >> 4] + kHex[byte & 0xf];
}

// A URI's durations: a unit always, positive, at most a day.
std::optional<std::chrono::milliseconds> durationValue(std::string_view text) {
  const auto value = parseDuration(text, BareNumber::Refused, std::chrono::hours(24));
  if (!value || value->count() <= 0) return std::nullopt;
  return value;
}

// Why a duration option's value is refused, with the fix: "command_timeout=1: give a unit, ...".
std::string durationProblem(std::string_view name, const std::string& value, const std::string& quoted) {
  const std::string shown = std::string(name) + "=" + quoted;
  if (isBareNumber(value)) return shown + ": give a unit, e.g. 1s or 500ms";
  return shown + " is not a positive duration of at most a day (e.g. 500ms, 2s, 1m)";
}

std::optional<std::size_t> countValue(std::string_view text, long long least) {
  long long value = 0;
  if (!parseInt(text, value) || value < least || value > 100000) return std::nullopt;
  return static_cast<std::size_t>(value);
}

// The option `name` as `scheme` takes it, or as a member of a `list` (null for the whole) does.
const UriOption* acceptedOption(const UriScheme& scheme, std::string_view name, const UriScheme* list) {
  const auto named = [&](const UriOption& option) { return option.name == name; };
  const auto own = std::find_if(scheme.options.begin(), scheme.options.end(), named);
  if (own != scheme.options.end()) return &*own;
  if (list == nullptr) return nullptr;
  const auto added = std::find_if(list->memberOptions.begin(), list->memberOptions.end(), named);
  return added != list->memberOptions.end() ? &*added : nullptr;
}

// The names of what `scheme` takes, as a member of `list` when not null.
std::string optionList(const UriScheme& scheme, const UriScheme* list) {
  std::string names;
  const auto add = [&](const UriOption& option) { names += (names.empty() ? "" : ", ") + std::string(option.name); };
  for (const auto& option : scheme.options) add(option);
  if (list != nullptr) {
    for (const auto& option : list->memberOptions) {
      if (acceptedOption(scheme, option.name, nullptr) == nullptr) add(option);
    }
  }
  return names.empty() ? "none" : names;
}

// "a://, b:// or c://": the schemes for which `which` holds.
template <typename Which>
std::string schemeList(Which which) {
  std::vector<std::string_view> names;
  for (const UriScheme* scheme : uriSchemes()) {
    if (which(*scheme)) names.push_back(scheme->name);
  }
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + std::string(names[i]) + "://";
  }
  return out;
}

}  // namespace

UriParser::UriParser(std::string_view whole)
    : whole_(whole), spans_(secretSpans(whole)), redacted_(masked(whole, spans_, 0, whole.size())) {}

void UriParser::fail(const std::string& problem) const {
  const std::string where = member_ == 0 ? "" : "member " + std::to_string(member_) + ": ";
  // An '@' past the first '/' or '?' after the scheme: likely a password that holds one.
  const auto authorityEnd = current_.find_first_of("/?", std::min(current_.find("://") + 3, current_.size()));
  const bool misplacedAt =
      authorityEnd != std::string_view::npos && current_.find('@', authorityEnd) != std::string_view::npos;
  throw ConfigError("dlock: bad URI '" + redacted_ + "': " + where + problem +
                    (misplacedAt ? " (a password's '/', '?' and '@' are written %2F, %3F and %40)" : ""));
}

std::string UriParser::quote(std::string_view part) const {
  const std::less<const char*> before;
  if (before(part.data(), whole_.data()) || before(whole_.data() + whole_.size(), part.data() + part.size())) {
    return "'***'";
  }
  const auto begin = static_cast<std::size_t>(part.data() - whole_.data());
  const std::size_t end = begin + part.size();
  for (const Span& span : spans_) {
    if (span.begin < end && begin < span.end) return "'***'";
    if (span.begin == span.end && begin < span.begin && span.begin < end) return "'***'";
  }
  return "'" + shown(part) + "'";
}

std::string UriParser::redact(std::string_view part) const {
  const auto begin = static_cast<std::size_t>(part.data() - whole_.data());
  return masked(whole_, spans_, begin, begin + part.size());
}

std::string UriParser::percentDecode(std::string_view in, const char* what) const {
  auto decoded = dlock::percentDecode(in);
  if (!decoded) fail(std::string("a bad or truncated %-escape in the ") + what + " (write '%' as %25)");
  return std::move(*decoded);
}

Endpoint UriParser::parseHost(std::string_view text, int defaultPort) const {
  Endpoint host;
  std::string_view name;
  std::string_view portText;
  if (!text.empty() && text.front() == '[') {  // [IPv6]:port
    const auto close = text.find(']');
    if (close == std::string_view::npos) fail("unclosed '[' in a host");
    name = text.substr(1, close - 1);
    const auto rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') fail("expected ':port' after ']'");
      portText = rest.substr(1);
    }
  } else {
    const auto colon = text.rfind(':');
    name = text.substr(0, colon);
    if (colon != std::string_view::npos) portText = text.substr(colon + 1);
  }
  if (name.empty()) fail("a host is empty");
  const bool bracketed = text.front() == '[';
  if (const auto bad = badHostCharacter(name, bracketed)) {
    fail("a host holds " + shownCharacter(*bad) + " (" + quote(name) + ")" +
         (bracketed ? ": an IPv6 address is hex digits, ':' and '.'"
                    : ": a host is a DNS name or an IPv4 address (letters, digits, '-', '.', '_'); an IPv6 one goes in "
                      "[brackets]"));
  }
  host.host = std::string(name);
  if (portText.empty() && text.find(':') != std::string_view::npos && text.front() != '[') {
    fail("the port of " + quote(name) + " is empty");
  }
  if (portText.empty()) {
    host.port = defaultPort;
  } else {
    long long port = 0;
    if (!parseInt(portText, port) || port < 1 || port > 65535) {
      fail("the port " + quote(portText) + " is not a number from 1 to 65535");
    }
    host.port = static_cast<int>(port);
  }
  return host;
}

std::vector<Endpoint> UriParser::parseHosts(std::string_view text, int defaultPort) const {
  std::vector<Endpoint> hosts;
  std::size_t start = 0;
  while (true) {
    const auto comma = text.find(',', start);
    hosts.push_back(parseHost(text.substr(start, comma == std::string_view::npos ? comma : comma - start), defaultPort));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return hosts;
}

int UriParser::database(std::string_view text) const {
  long long db = 0;
  if (!parseInt(text, db) || db < 0 || db > 1000000) {
    fail("the database " + quote(text) + " is not a non-negative number");
  }
  return static_cast<int>(db);
}

void UriParser::checkValue(const UriOption& option, std::string_view raw, const std::string& value) const {
  const std::string shown = "option " + std::string(option.name) + "=" + quote(raw);
  switch (option.type) {
    case UriOptionType::Duration:
      if (!durationValue(value)) fail("option " + durationProblem(option.name, value, quote(raw)));
      break;
    case UriOptionType::Count:
      if (!countValue(value, 0)) fail(shown + " is not a count");
      break;
    case UriOptionType::PositiveCount:
      if (!countValue(value, 1)) fail(shown + " is not a count of at least 1");
      break;
    case UriOptionType::Flag:
      if (value != "true" && value != "false") fail(shown + " is not true or false");
      break;
    case UriOptionType::Text:
    case UriOptionType::Secret:
      break;
  }
}

void UriParser::readUserinfo(std::string_view userinfo, ParsedUri& parsed) const {
  const auto colon = userinfo.find(':');
  parsed.user = percentDecode(userinfo.substr(0, colon), "user");
  if (colon != std::string_view::npos) parsed.password = percentDecode(userinfo.substr(colon + 1), "password");
  if (colon == std::string_view::npos) {
    // redis://secret@host is the common "password only" spelling.
    parsed.password = parsed.user;
    parsed.user.clear();
  }
}

void UriParser::readLocation(const UriScheme& scheme, std::string_view rest, ParsedUri& parsed) const {
  if (scheme.socketPath) {
    // [userinfo@]/path: the userinfo ends at the last '@' (a path's own '@' is written %40).
    const auto at = rest.rfind('@');
    std::string_view path = rest;
    if (at != std::string_view::npos) {
      readUserinfo(rest.substr(0, at), parsed);
      path = rest.substr(at + 1);
    }
    if (path.empty() || path.front() != '/') {
      fail(parsed.scheme + ":// takes an absolute socket path (" + parsed.scheme + ":///run/redis.sock, " +
           parsed.scheme + "://:password@/run/redis.sock)");
    }
    parsed.socketPath = percentDecode(path, "socket path");
    // The kernel reads the path up to a NUL: "/a%00/b" would connect to "/a".
    if (parsed.socketPath.find('\0') != std::string::npos) fail("the socket path holds a NUL byte (%00)");
    return;
  }
  // Authority, then path.
  const auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  const std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  const auto at = authority.rfind('@');
  if (at != std::string_view::npos) {
    readUserinfo(authority.substr(0, at), parsed);
    authority = authority.substr(at + 1);
  }
  if (authority.empty()) fail("no host");
  parsed.hosts = parseHosts(authority, scheme.defaultPort);
  if (scheme.oneHost && parsed.hosts.size() != 1) {
    fail(parsed.scheme + ":// takes one host; use " +
         schemeList([](const UriScheme& other) { return !other.oneHost && other.defaultPort != 0; }) +
         " for several");
  }
  scheme.path(*this, path, parsed);
}

ParsedUri UriParser::parse(std::string_view text, std::size_t member, const UriScheme* list) {
  member_ = member;
  current_ = text;
  ParsedUri parsed;
  parsed.redacted = redact(text);
  if (text.empty()) fail(member == 0 ? "it is empty" : "an empty member in the redlock list");

  const auto schemeEnd = text.find("://");
  if (schemeEnd == std::string_view::npos) fail("no scheme (expected e.g. redis://host:6379)");
  const std::string_view schemeText = text.substr(0, schemeEnd);
  parsed.scheme = lowerCase(schemeText);
  std::string_view rest = text.substr(schemeEnd + 3);
  const UriScheme* scheme = findScheme(parsed.scheme);
  if (scheme == nullptr) {
    const auto any = [](const UriScheme&) { return true; };
    fail("unknown scheme " + quote(schemeText) + " (expected " + schemeList(any) + ")");
  }

  if (scheme->defaultPort == 0 && !scheme->socketPath) {
    if (!rest.empty()) fail(parsed.scheme + ":// takes nothing after the scheme");
    return parsed;
  }
  if (scheme->memberList && rest.find("://") != std::string_view::npos) {
    std::size_t number = 0;
    std::size_t start = 0;
    while (start <= rest.size()) {
      const auto semi = rest.find(';', start);
      const auto memberText = rest.substr(start, semi == std::string_view::npos ? semi : semi - start);
      ++number;
      parsed.members.push_back(parse(memberText, number, scheme));
      member_ = member;
      current_ = text;
      if (semi == std::string_view::npos) break;
      start = semi + 1;
    }
    return parsed;
  }

  // Query: each option one the scheme takes; the values are checked once the shape is.
  std::vector<std::pair<const UriOption*, std::string_view>> given;
  const auto question = rest.find('?');
  if (question != std::string_view::npos) {
    const std::string_view query = rest.substr(question + 1);
    rest = rest.substr(0, question);
    // A raw '@' after the host is most likely the tail of a password holding '?' ("redis://pa?ss@h"
    // would otherwise connect to host "pa" and show it): refuse it rather than guess.
    if (query.find('@') != std::string_view::npos) fail("a raw '@' in the query (write '@' in a value as %40)");
    std::size_t start = 0;
    while (start < query.size()) {
      const auto amp = query.find('&', start);
      const auto pair = query.substr(start, amp == std::string_view::npos ? amp : amp - start);
      const auto eq = pair.find('=');
      if (eq == std::string_view::npos || eq == 0) fail("the query option " + quote(pair) + " has no name=value");
      const std::string_view name = pair.substr(0, eq);
      const UriOption* option = acceptedOption(*scheme, name, list);
      if (option == nullptr) {
        const std::string where =
            parsed.scheme + "://" + (list != nullptr ? " (a " + std::string(list->name) + " member)" : "");
        fail((anyOption(name) != nullptr ? "option " + quote(name) + " does not apply to "
                                         : "unknown option " + quote(name) + " for ") +
             where + "; it takes " + optionList(*scheme, list));
      }
      parsed.options[std::string(name)] = percentDecode(pair.substr(eq + 1), "query");
      given.emplace_back(option, pair.substr(eq + 1));
      if (amp == std::string_view::npos) break;
      start = amp + 1;
    }
  }

  readLocation(*scheme, rest, parsed);

  // The values, now, so a bad one fails at connect rather than at first use.
  for (const auto& [option, raw] : given) checkValue(*option, raw, parsed.options[std::string(option->name)]);
  if (scheme->check != nullptr) scheme->check(*this, parsed);
  return parsed;
}

}  // namespace detail

const std::vector<UriOption>& uriOptions(std::string_view scheme) {
  static const std::vector<UriOption> none;
  const detail::UriScheme* entry = detail::findScheme(scheme);
  return entry != nullptr ? entry->options : none;
}

ParsedUri parseUri(std::string_view uri) { return detail::UriParser(uri).parse(uri, 0); }

std::chrono::milliseconds ParsedUri::duration(const std::string& name, std::chrono::milliseconds fallback) const {
  const auto it = options.find(name);
  if (it == options.end()) return fallback;
  const auto value = detail::durationValue(it->second);
  if (!value) {
    throw ConfigError("dlock: bad URI '" + redacted + "': option " +
                      detail::durationProblem(name, it->second, "'" + it->second + "'"));
  }
  return *value;
}

std::size_t ParsedUri::count(const std::string& name, std::size_t fallback) const {
  const auto it = options.find(name);
  if (it == options.end()) return fallback;
  const auto value = detail::countValue(it->second, 0);
  if (!value) throw ConfigError("dlock: bad URI '" + redacted + "': option " + name + " is not a count");
  return *value;
}

bool ParsedUri::flag(const std::string& name, bool fallback) const {
  const auto it = options.find(name);
  if (it == options.end()) return fallback;
  if (it->second != "true" && it->second != "false") {
    throw ConfigError("dlock: bad URI '" + redacted + "': option " + name + " is not true or false");
  }
  return it->second == "true";
}

std::string ParsedUri::text(const std::string& name, const std::string& fallback) const {
  const auto it = options.find(name);
  return it == options.end() ? fallback : it->second;
}

}  // namespace dlock
