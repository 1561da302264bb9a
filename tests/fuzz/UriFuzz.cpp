// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the URI parser, two properties:
// 1. Any byte string given to parseUri() is either parsed or refused with ConfigError; never a
//    crash, never another exception.
// 2. No text made from a URI shows its password, whatever the password's bytes: a password taken
//    from the input is written into URIs of every scheme (as userinfo, as sentinel_password, in a
//    redlock list; rediss and unix forms beside TLS options), raw or %-escaped, next to more input
//    bytes that break the URI at any stage;
//    neither the ConfigError's message, nor redacted or redactUri(), may then contain it.
//    (parseUri logs nothing; those are all the texts it makes.)
//
// Input: [template][escaping][password bytes] 0xFF [other bytes]. The password always holds
// kMarker, which nothing else may: a message that contains the password copied it, it did not
// happen to spell it (short passwords such as "1" or "redis" occur in any message).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "dlock/LockError.h"
#include "dlock/uri.h"

namespace {

constexpr std::string_view kMarker = "Pw7Mk9";

std::size_t occurrences(std::string_view haystack, std::string_view needle) {
  std::size_t count = 0;
  for (auto pos = haystack.find(needle); pos != std::string_view::npos; pos = haystack.find(needle, pos + 1)) ++count;
  return count;
}

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// `text` with each byte `escaped` says written as `prefix` and two hex digits from `digits`.
template <class Escaped>
std::string escapedBytes(std::string_view text, Escaped escaped, std::string_view prefix, const char* digits) {
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (!escaped(c)) {
      out += c;
    } else {
      out += prefix;
      out += digits[byte >> 4];
      out += digits[byte & 0xf];
    }
  }
  return out;
}

bool printable(char c) { return static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f; }

// The password as written in the URI: raw (0), its URI syntax %-escaped (1), or all of it (2).
std::string written(std::string_view password, unsigned escaping) {
  if (escaping % 3 == 0) return std::string(password);
  const auto escaped = [&](char c) {
    const bool syntax = std::string_view(":/?#[]@;&=%+, ").find(c) != std::string_view::npos;
    return escaping % 3 == 2 || c == ' ' || !printable(c) || syntax;
  };
  return escapedBytes(password, escaped, "%", "0123456789ABCDEF");
}

// `text` as messages show it: a byte outside printable ASCII as \xHH (uri.h, redactUri). Written
// apart from the library's, as the oracle it is checked against.
std::string shownInMessages(std::string_view text) {
  return escapedBytes(text, [](char c) { return !printable(c); }, "\\x", "0123456789abcdef");
}

// `text` with each valid %XX decoded, the rest as it is.
std::string leniently(std::string_view text) {
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && hex(text[i + 1]) >= 0 && hex(text[i + 2]) >= 0) {
      out += static_cast<char>(hex(text[i + 1]) * 16 + hex(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

// {P}: the password as written; {N}: the other input bytes. Every scheme, every place a password
// goes, and the other bytes before, inside and after the URI (a bad host, port, path or option).
constexpr std::string_view kTemplates[] = {
    "redis://{P}@h:1{N}",
    "redis://:{P}@h:1/2{N}",
    "redis://user:{P}@h:1?connect_timeout=1s{N}",
    "redis://:{P}@{N}",
    "{N}redis://:{P}@h:1",
    "redis+sentinel://u:{P}@s1:1,s2:2/m/1{N}",
    "redis+sentinel://s1:1/m?sentinel_password={P}{N}",
    "redis+sentinel://:{P}@s1/m?prefix=x&sentinel_password={P}{N}",
    "redis+sentinel://u:{P}@{N}",
    "redis+cluster://:{P}@n1:1,n2:2{N}",
    "redlock://:{P}@a:1,b:2,c:3{N}",
    "redlock://redis://:{P}@a:1;redis://b:2;redis://u:{P}@c:3{N}",
    "redlock://redis://a:1;redis+sentinel://s/m?sentinel_password={P};redis://b:2{N}",
    "redlock://redis://a:1{N};redis://{P}@b:2",
    "redlock://redis://:{P}@{N};redis://b:2",
    "memory://:{P}@x{N}",
    "rediss://:{P}@h:6380?tls_ca_file=/ca.pem{N}",
    "rediss://u:{P}@h:1/2?tls_cert_file=/c.pem&tls_key_file=/k.pem&tls_verify=full{N}",
    "rediss://{P}@h?tls_server_name=n{N}",
    "rediss+sentinel://u:{P}@s1:1,s2:2/m?tls_ca_dir=/d&sentinel_password={P}{N}",
    "rediss+cluster://:{P}@n1:1,n2:2?tls_verify=none{N}",
    "unix://:{P}@/run/redis.sock?db=1{N}",
    "unix://{P}@/run/redis.sock{N}",
    "unix://u:{P}@{N}",
    "{N}unix://:{P}@/s",
    "redlock://rediss://:{P}@a:1?tls_ca_file=/ca;unix://:{P}@/b.sock;redis://c:3{N}",
    "redlock://unix:///a.sock{N};rediss://{P}@b:2",
};

std::string fill(std::string_view pattern, std::string_view password, std::string_view other) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern.substr(i, 3) == "{P}") {
      out += password;
      i += 2;
    } else if (pattern.substr(i, 3) == "{N}") {
      out += other;
      i += 2;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

// Aborts when `text` shows the password: as given, as written, or any part holding the marker (a
// message shows a byte outside printable ASCII as \xHH, so a password of such bytes shows only there).
void checkHidden(std::string_view text, std::string_view password, std::string_view asWritten) {
  if (contains(text, password) || contains(text, asWritten) || contains(text, kMarker)) std::abort();
}

void checkMembersHidden(const dlock::ParsedUri& uri, std::string_view password, std::string_view asWritten) {
  checkHidden(uri.redacted, password, asWritten);
  for (const auto& member : uri.members) checkMembersHidden(member, password, asWritten);
}

// Property 1, and the old check: the parsed password's own place is masked.
void parseAnything(std::string_view text) {
  try {
    const dlock::ParsedUri uri = dlock::parseUri(text);
    (void)uri.duration("command_timeout", std::chrono::milliseconds(1));
    (void)uri.count("pool_size", 1);
    // Shorter passwords can coincide with the URI's own syntax, e.g. "@"; one with a '*' with the
    // mask itself: "x:***@" holds the password "x:**".
    const bool distinctive = uri.password.size() >= 4 && uri.password.find('*') == std::string::npos;
    // Counted in the text as messages show it: an escape's hex digits can spell it ("\x9c" "ret").
    const std::size_t given = distinctive ? occurrences(shownInMessages(text), uri.password) : 0;
    // Written as it is, one of those is its own place, which must be masked; %-escaped, none is, and
    // the same text elsewhere (a socket path "/abcd" beside "unix://%61bcd@") is not the password's.
    const auto passwords = dlock::uriPasswords(text);
    const bool literal = std::find(passwords.begin(), passwords.end(), uri.password) != passwords.end() &&
                         shownInMessages(uri.password) == uri.password;
    const std::size_t shownElsewhere = literal && given > 0 ? given - 1 : given;
    if (given > 0 && occurrences(uri.redacted, uri.password) > shownElsewhere) std::abort();
  } catch (const dlock::ConfigError& error) {
    (void)error.what();
  }
  (void)dlock::redactUri(text);
  (void)dlock::uriPasswords(text);
}

// Property 2.
void passwordNeverShown(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return;
  const std::string_view pattern = kTemplates[data[0] % std::size(kTemplates)];
  const unsigned escaping = data[1];
  const std::string_view rest(reinterpret_cast<const char*>(data + 2), size - 2);
  const auto separator = rest.find('\xff');
  std::string_view bytes = rest.substr(0, separator);
  const std::string_view other = separator == std::string_view::npos ? std::string_view() : rest.substr(separator + 1);
  // The marker somewhere in the password (where, the input says).
  const std::size_t at = bytes.empty() ? 0 : static_cast<unsigned char>(bytes.front()) % (bytes.size() + 1);
  const std::string password = std::string(bytes.substr(0, at)) + std::string(kMarker) + std::string(bytes.substr(at));
  // Not the password's: `other` spelling the marker, raw or %-escaped (decoded where it can be, since
  // the parser decodes a part of `other` that is valid even when the whole is not).
  if (contains(other, kMarker) || contains(leniently(other), kMarker)) return;
  std::string asWritten = written(password, escaping);
  // In the password-only spelling ("redis://secret@h") a raw ':' is the user/password separator
  // (RFC 3986): what comes before it is a user name, shown by design. A password holding ':'
  // is written %3A there.
  if (pattern.find("//{P}@") != std::string_view::npos) {
    for (std::size_t pos = asWritten.find(':'); pos != std::string::npos; pos = asWritten.find(':', pos)) {
      asWritten.replace(pos, 1, "%3A");
    }
  }
  // In a query value a raw '&' followed by an option-shaped "name=" ends the value (RFC 3986: the
  // README says to write it %26), so what follows is read as that option, shown by design.
  if (pattern.find("={P}") != std::string_view::npos) {
    const std::string after = asWritten + std::string(other);
    std::string escaped;
    for (std::size_t i = 0; i < asWritten.size(); ++i) {
      std::size_t end = i + 1;
      while (end < after.size() && ((after[end] >= 'a' && after[end] <= 'z') || (after[end] >= '0' && after[end] <= '9') ||
                                    after[end] == '_')) {
        ++end;
      }
      const bool optionShaped = asWritten[i] == '&' && end > i + 1 && end < after.size() && after[end] == '=';
      escaped += optionShaped ? std::string("%26") : std::string(1, asWritten[i]);
    }
    asWritten = escaped;
  }
  const std::string uri = fill(pattern, asWritten, other);

  try {
    const dlock::ParsedUri parsed = dlock::parseUri(uri);
    checkMembersHidden(parsed, password, asWritten);
  } catch (const dlock::ConfigError& error) {
    checkHidden(error.what(), password, asWritten);
  }
  checkHidden(dlock::redactUri(uri), password, asWritten);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  parseAnything(std::string_view(reinterpret_cast<const char*>(data), size));
  passwordNeverShown(data, size);
  return 0;
}
