// libFuzzer target: any byte string given to parseUri() is either parsed or refused with
// ConfigError; never a crash, never another exception, and a refusal never echoes a password.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "dlock/LockError.h"
#include "dlock/core/Uri.h"

namespace {

std::size_t occurrences(std::string_view haystack, std::string_view needle) {
  std::size_t count = 0;
  for (auto pos = haystack.find(needle); pos != std::string_view::npos; pos = haystack.find(needle, pos + 1)) ++count;
  return count;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const dlock::ParsedUri uri = dlock::parseUri(text);
    // What parsed must be usable: typed options were checked already.
    (void)uri.duration("command_timeout", std::chrono::milliseconds(1));
    (void)uri.count("pool_size", 1);
    // The password's own place is masked: it occurs fewer times in the redacted URI (it may
    // legitimately recur elsewhere, e.g. inside a query value).
    // (Shorter ones can coincide with the URI's own syntax, e.g. a password of "@", and one with a
    // '*' with the mask itself: "x:***@" holds the password "x:**".)
    const bool distinctive = uri.password.size() >= 4 && uri.password.find('*') == std::string::npos;
    const std::size_t given = distinctive ? occurrences(text, uri.password) : 0;
    if (given > 0 && occurrences(uri.redacted, uri.password) >= given) std::abort();
  } catch (const dlock::ConfigError& error) {
    (void)error.what();
  }
  (void)dlock::redactUri(text);
  return 0;
}
