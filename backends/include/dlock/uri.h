// SPDX-License-Identifier: Apache-2.0
// uri.h — parsing of backend URIs (see <dlock/connect.h> for the forms). Plain values.
//
//   Endpoint            a host and port of the URI (<dlock/common/Endpoint.h>)
//   uriOptions(scheme)  the query options a scheme accepts: name, type, meaning
//   parseUri(uri)       the URI's parts → ParsedUri; ConfigError when malformed
//   redactUri(uri)      the URI for messages, with whatever may hold a password masked
//   uriPasswords(uri)   the masked passwords themselves, as written (to scrub foreign text)
//   percentDecode(text) %XX escapes decoded, as the URI's user, password and query values are
//
// parseUri() checks the shape (scheme, hosts, ports, database) and the options: each must be one
// the scheme accepts, with a value of its type; each scheme declares its own, beside the code that
// turns them into its backend's options. A ConfigError names the problem and quotes the URI as
// redactUri() shows it, and never quotes a part of the URI that redactUri() masks.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/common/Endpoint.h"

namespace dlock {

enum class UriOptionType {
  Duration,       // "250ms", "2s", "1m" (units us, ms, s, m, h; see <dlock/duration.h>); positive, at most a day
  Count,          // 0 to 100000
  PositiveCount,  // 1 to 100000
  Flag,           // true or false
  Text,
  Secret,         // text that is never shown: masked by redactUri
};

// One query option a scheme accepts.
struct UriOption {
  std::string_view name;
  UriOptionType type;
  std::string_view meaning;
};

// The query options `scheme` accepts (lower case; none for memory:// and unknown schemes). A
// member of a redlock list takes those of its own scheme, and node_timeout.
[[nodiscard]] const std::vector<UriOption>& uriOptions(std::string_view scheme);

struct ParsedUri {
  std::string scheme;    // memory, redis, rediss, redis+sentinel, rediss+sentinel, redis+cluster,
                         // rediss+cluster, unix, redlock
  std::string user;      // percent-decoded
  std::string password;  // percent-decoded; never printed
  std::vector<Endpoint> hosts;          // none for unix://
  std::string socketPath;               // unix: the socket's path, percent-decoded
  std::string masterName;               // redis+sentinel
  int db = 0;                           // redis(s), redis(s)+sentinel, unix (?db=)
  std::map<std::string, std::string> options;  // the query, by name, percent-decoded; checked
  std::vector<ParsedUri> members;       // redlock://uri;uri;... : the member URIs
  std::string redacted;                 // the URI as given, through redactUri: for messages

  // A query option as a duration: "250ms", "2s"; `fallback` when absent.
  // ConfigError when malformed or not positive.
  [[nodiscard]] std::chrono::milliseconds duration(const std::string& name, std::chrono::milliseconds fallback) const;
  // A query option as a count; `fallback` when absent.
  [[nodiscard]] std::size_t count(const std::string& name, std::size_t fallback) const;
  // A query option as a flag (true or false); `fallback` when absent.
  [[nodiscard]] bool flag(const std::string& name, bool fallback) const;
  // A query option as text; `fallback` when absent.
  [[nodiscard]] std::string text(const std::string& name, const std::string& fallback) const;
};

// `uri` for messages: redis://user:***@host:6379. A password cannot be told apart from the URI's
// syntax when it holds the delimiters ('/', '?', '@', ';', '&', …), so the mask is generous: in each
// URI (each member of a redlock list) from after "user:" to the last '@', and each query value that
// is not a known option's plain value (secrets such as sentinel_password, unknown options) up to
// the next "&name=". parseUri refuses a raw '@' in a query value (it may be a password's tail):
// write it as %40. A byte outside printable ASCII is shown as \xHH.
[[nodiscard]] std::string redactUri(std::string_view uri);

// The userinfo passwords and secret option values redactUri(uri) masks, as written in `uri`
// (not percent-decoded), each once.
[[nodiscard]] std::vector<std::string> uriPasswords(std::string_view uri);

// `text` with each %XX escape decoded; nullopt when a '%' is not followed by two hex digits.
[[nodiscard]] std::optional<std::string> percentDecode(std::string_view text);

// The parts of `uri`, its options checked against its scheme's; ConfigError when malformed.
[[nodiscard]] ParsedUri parseUri(std::string_view uri);

}  // namespace dlock
