// KeyNames.h — the Redis names of one lock: `<prefix>{<key>}` holds the owner token,
// `<prefix>{<key>}:fence` the fencing counter and `<prefix>{<key>}:released` is the release
// channel. They share the `{<key>}` hash tag, so one script touches one cluster slot. The
// companions are made on demand: a call builds only the names it sends.
#pragma once

#include <string>
#include <string_view>

namespace dlock::detail {

struct KeyNames {
  std::string lock;

  [[nodiscard]] std::string fence() const { return lock + ":fence"; }
  [[nodiscard]] std::string channel() const { return lock + ":released"; }
};

inline KeyNames keyNames(std::string_view prefix, std::string_view key) {
  KeyNames names;
  names.lock.reserve(prefix.size() + key.size() + 2);
  names.lock.append(prefix).append("{").append(key).append("}");
  return names;
}

}  // namespace dlock::detail
