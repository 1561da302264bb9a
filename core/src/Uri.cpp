#include "dlock/core/Uri.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "dlock/LockError.h"

namespace dlock {
namespace {

[[noreturn]] void fail(const std::string& redacted, const std::string& problem) {
  throw ConfigError("dlock: bad URI '" + redacted + "': " + problem);
}

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percentDecode(std::string_view in, const std::string& redacted, const char* what) {
  std::string out;
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) fail(redacted, std::string("truncated %-escape in the ") + what);
    const int high = hexValue(in[i + 1]);
    const int low = hexValue(in[i + 2]);
    if (high < 0 || low < 0) fail(redacted, std::string("bad %-escape in the ") + what);
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

bool parseInt(std::string_view text, long long& value) {
  if (text.empty()) return false;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return ec == std::errc() && ptr == end;
}

UriHost parseHost(std::string_view text, int defaultPort, const std::string& redacted) {
  UriHost host;
  std::string_view portText;
  if (!text.empty() && text.front() == '[') {  // [IPv6]:port
    const auto close = text.find(']');
    if (close == std::string_view::npos) fail(redacted, "unclosed '[' in a host");
    host.host = std::string(text.substr(1, close - 1));
    const auto rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') fail(redacted, "expected ':port' after ']'");
      portText = rest.substr(1);
    }
  } else {
    const auto colon = text.rfind(':');
    host.host = std::string(text.substr(0, colon));
    if (colon != std::string_view::npos) portText = text.substr(colon + 1);
  }
  if (host.host.empty()) fail(redacted, "a host is empty");
  if (portText.empty() && text.find(':') != std::string_view::npos && text.front() != '[') {
    fail(redacted, "the port of '" + host.host + "' is empty");
  }
  if (portText.empty()) {
    host.port = defaultPort;
  } else {
    long long port = 0;
    if (!parseInt(portText, port) || port < 1 || port > 65535) {
      fail(redacted, "the port '" + std::string(portText) + "' is not a number from 1 to 65535");
    }
    host.port = static_cast<int>(port);
  }
  return host;
}

std::vector<UriHost> parseHosts(std::string_view text, int defaultPort, const std::string& redacted) {
  std::vector<UriHost> hosts;
  std::size_t start = 0;
  while (true) {
    const auto comma = text.find(',', start);
    hosts.push_back(parseHost(text.substr(start, comma - start), defaultPort, redacted));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return hosts;
}

int parseDb(std::string_view text, const std::string& redacted) {
  long long db = 0;
  if (!parseInt(text, db) || db < 0 || db > 1000000) {
    fail(redacted, "the database '" + std::string(text) + "' is not a non-negative number");
  }
  return static_cast<int>(db);
}

}  // namespace

std::string redactUri(std::string_view uri) {
  // redlock://uri;uri;... : each member is a URI of its own. (Only for that scheme: "://" may
  // also occur inside a query value of any other.)
  const auto schemeEnd = uri.find("://");
  const auto isRedlock = [&] {
    if (schemeEnd != 7) return false;
    std::string scheme(uri.substr(0, 7));
    std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return scheme == "redlock";
  };
  if (schemeEnd != std::string_view::npos && uri.find("://", schemeEnd + 3) != std::string_view::npos && isRedlock()) {
    std::string out(uri.substr(0, schemeEnd + 3));
    std::string_view members = uri.substr(schemeEnd + 3);
    while (true) {
      const auto semi = members.find(';');
      out += redactUri(members.substr(0, semi));
      if (semi == std::string_view::npos) break;
      out += ';';
      members.remove_prefix(semi + 1);
    }
    return out;
  }
  std::string out(uri);
  // Query options that carry secrets: mask their values.
  const auto question = out.find('?');
  if (question != std::string::npos) {
    std::size_t start = question + 1;
    while (start < out.size()) {
      const auto amp = out.find('&', start);
      const auto end = amp == std::string::npos ? out.size() : amp;
      const auto eq = out.find('=', start);
      if (eq != std::string::npos && eq < end && out.substr(start, eq - start).find("password") != std::string::npos) {
        out.replace(eq + 1, end - eq - 1, "***");
      }
      const auto next = out.find('&', start);
      if (next == std::string::npos) break;
      start = next + 1;
    }
  }
  // The password of the userinfo: scheme://user:PASSWORD@host.
  const auto scheme = out.find("://");
  if (scheme == std::string::npos) return out;
  const auto authorityStart = scheme + 3;
  const auto authorityEnd = std::min(out.find('/', authorityStart), out.find('?', authorityStart));
  const auto at = out.rfind('@', authorityEnd == std::string::npos ? out.size() : authorityEnd);
  if (at == std::string::npos || at < authorityStart) return out;
  const auto colon = out.find(':', authorityStart);
  if (colon == std::string::npos || colon > at) {
    // scheme://SECRET@host is the password-only spelling.
    return out.substr(0, authorityStart) + "***" + out.substr(at);
  }
  return out.substr(0, colon + 1) + "***" + out.substr(at);
}

ParsedUri parseUri(std::string_view uri) {
  ParsedUri parsed;
  parsed.redacted = redactUri(uri);
  const std::string& redacted = parsed.redacted;
  if (uri.empty()) fail(redacted, "it is empty");

  const auto schemeEnd = uri.find("://");
  if (schemeEnd == std::string_view::npos) fail(redacted, "no scheme (expected e.g. redis://host:6379)");
  parsed.scheme = std::string(uri.substr(0, schemeEnd));
  std::transform(parsed.scheme.begin(), parsed.scheme.end(), parsed.scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::string_view rest = uri.substr(schemeEnd + 3);

  if (parsed.scheme == "memory") {
    if (!rest.empty()) fail(redacted, "memory:// takes nothing after the scheme");
    return parsed;
  }
  if (parsed.scheme == "redlock" && rest.find("://") != std::string_view::npos) {
    std::size_t start = 0;
    while (start <= rest.size()) {
      const auto semi = rest.find(';', start);
      const auto member = rest.substr(start, semi == std::string_view::npos ? std::string_view::npos : semi - start);
      if (member.empty()) fail(redacted, "an empty member in the redlock list");
      (void)parseUri(member);  // validate each member now
      parsed.members.emplace_back(member);
      if (semi == std::string_view::npos) break;
      start = semi + 1;
    }
    return parsed;
  }
  const bool sentinel = parsed.scheme == "redis+sentinel";
  const bool cluster = parsed.scheme == "redis+cluster";
  if (parsed.scheme != "redis" && !sentinel && !cluster && parsed.scheme != "redlock") {
    fail(redacted, "unknown scheme '" + parsed.scheme +
                       "' (expected redis://, redis+sentinel://, redis+cluster://, redlock:// or memory://)");
  }

  // Query.
  const auto question = rest.find('?');
  if (question != std::string_view::npos) {
    std::string_view query = rest.substr(question + 1);
    rest = rest.substr(0, question);
    std::size_t start = 0;
    while (start < query.size()) {
      const auto amp = query.find('&', start);
      const auto pair = query.substr(start, amp == std::string_view::npos ? std::string_view::npos : amp - start);
      const auto eq = pair.find('=');
      if (eq == std::string_view::npos || eq == 0) fail(redacted, "the query option '" + std::string(pair) + "' has no name=value");
      const std::string name(pair.substr(0, eq));
      const auto& known = knownUriOptions();
      if (std::find(known.begin(), known.end(), name) == known.end()) {
        fail(redacted, "unknown option '" + name + "'");
      }
      parsed.options[name] = percentDecode(pair.substr(eq + 1), redacted, "query");
      if (amp == std::string_view::npos) break;
      start = amp + 1;
    }
  }

  // Authority, then path.
  const auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  const auto at = authority.rfind('@');
  if (at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    const auto colon = userinfo.find(':');
    parsed.user = percentDecode(userinfo.substr(0, colon), redacted, "user");
    if (colon != std::string_view::npos) parsed.password = percentDecode(userinfo.substr(colon + 1), redacted, "password");
    if (colon == std::string_view::npos) {
      // redis://secret@host is the common "password only" spelling.
      parsed.password = parsed.user;
      parsed.user.clear();
    }
  }
  if (authority.empty()) fail(redacted, "no host");
  parsed.hosts = parseHosts(authority, sentinel ? 26379 : 6379, redacted);
  if (parsed.scheme == "redis" && parsed.hosts.size() != 1) {
    fail(redacted, "redis:// takes one host; use redis+sentinel://, redis+cluster:// or redlock:// for several");
  }

  if (sentinel) {
    const auto nextSlash = path.find('/');
    parsed.masterName = std::string(path.substr(0, nextSlash));
    if (parsed.masterName.empty()) fail(redacted, "no master name (redis+sentinel://host:port/mastername)");
    if (nextSlash != std::string_view::npos) parsed.db = parseDb(path.substr(nextSlash + 1), redacted);
  } else if (!path.empty()) {
    if (cluster) fail(redacted, "a cluster has only database 0; remove '/" + std::string(path) + "'");
    if (parsed.scheme == "redlock") fail(redacted, "redlock:// takes no database; give member URIs instead");
    parsed.db = parseDb(path, redacted);
  }

  // Check the typed options now, so a bad value fails at connect rather than at first use.
  for (const char* name : {"connect_timeout", "command_timeout", "pool_wait", "wait_timeout", "node_timeout"}) {
    (void)parsed.duration(name, std::chrono::milliseconds(1));
  }
  for (const char* name : {"pool_size", "wait_replicas"}) (void)parsed.count(name, 1);
  return parsed;
}

std::chrono::milliseconds ParsedUri::duration(const std::string& name, std::chrono::milliseconds fallback) const {
  const auto it = options.find(name);
  if (it == options.end()) return fallback;
  std::string_view text = it->second;
  long long scale = 1;
  if (text.size() > 2 && text.substr(text.size() - 2) == "ms") {
    text.remove_suffix(2);
  } else if (text.size() > 1 && text.back() == 's') {
    text.remove_suffix(1);
    scale = 1000;
  }
  long long value = 0;
  if (!parseInt(text, value) || value <= 0 || value > 86400000LL) {
    fail(redacted, "option " + name + "='" + it->second + "' is not a positive duration (e.g. 250, 250ms, 2s)");
  }
  return std::chrono::milliseconds(value * scale);
}

std::size_t ParsedUri::count(const std::string& name, std::size_t fallback) const {
  const auto it = options.find(name);
  if (it == options.end()) return fallback;
  long long value = 0;
  if (!parseInt(it->second, value) || value < 0 || value > 100000) {
    fail(redacted, "option " + name + "='" + it->second + "' is not a count");
  }
  if (value == 0 && name == "pool_size") fail(redacted, "option pool_size must be at least 1");
  return static_cast<std::size_t>(value);
}

std::string ParsedUri::text(const std::string& name, const std::string& fallback) const {
  const auto it = options.find(name);
  return it == options.end() ? fallback : it->second;
}

}  // namespace dlock
