// Uri.h — parsing of backend URIs (see <dlock/connect.h> for the forms). Plain values.
//
// parseUri() checks the shape only (scheme, hosts, ports, database, option names and values);
// what a backend makes of it is dlock::connect()'s business. Errors are ConfigError naming the
// problem and quoting the URI with its password masked.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace dlock {

struct UriHost {
  std::string host;
  int port = 0;
};

struct ParsedUri {
  std::string scheme;    // memory, redis, redis+sentinel, redis+cluster, redlock
  std::string user;      // percent-decoded
  std::string password;  // percent-decoded; never printed
  std::vector<UriHost> hosts;
  std::string masterName;               // redis+sentinel
  int db = 0;                           // redis, redis+sentinel
  std::map<std::string, std::string> options;  // the query, by name
  std::vector<std::string> members;     // redlock://uri;uri;... : the member URIs, unparsed
  std::string redacted;                 // the URI as given, password masked: for messages

  // A query option as a duration: "250", "250ms" or "2s"; `fallback` when absent.
  // ConfigError when malformed or not positive.
  [[nodiscard]] std::chrono::milliseconds duration(const std::string& name, std::chrono::milliseconds fallback) const;
  // A query option as a positive count; `fallback` when absent.
  [[nodiscard]] std::size_t count(const std::string& name, std::size_t fallback) const;
  // A query option as text; `fallback` when absent.
  [[nodiscard]] std::string text(const std::string& name, const std::string& fallback) const;
};

// Options every Redis scheme accepts; parseUri rejects any other name.
inline const std::vector<std::string>& knownUriOptions() {
  static const std::vector<std::string> names = {
      "connect_timeout", "command_timeout", "pool_size", "pool_wait", "prefix",
      "sentinel_user", "sentinel_password", "wait_replicas", "wait_timeout", "node_timeout"};
  return names;
}

// Masks the password of a URI for messages: redis://user:***@host:6379.
[[nodiscard]] std::string redactUri(std::string_view uri);

[[nodiscard]] ParsedUri parseUri(std::string_view uri);

}  // namespace dlock
