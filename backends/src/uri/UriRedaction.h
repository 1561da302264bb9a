// SPDX-License-Identifier: Apache-2.0
// UriRedaction.h — where a URI may hold a password, for redactUri() and for the parser's messages.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::detail {

// [begin, end) of a URI's text, shown as "***" (also when empty, so that the mask is seen).
struct Span {
  std::size_t begin = 0;
  std::size_t end = 0;
  bool password = false;  // a userinfo password or a secret option's value (not an unknown option's)
};

// Every part of `text` that may hold a password, in order, overlaps merged.
std::vector<Span> secretSpans(std::string_view text);

// `text` for a message: a byte outside printable ASCII as \xHH (a NUL would end the message's
// C string, a control byte would forge log lines).
std::string shown(std::string_view text);
void appendShown(std::string& out, std::string_view text);

// `text` [begin, end) with the spans masked, shown().
std::string masked(std::string_view text, const std::vector<Span>& spans, std::size_t begin, std::size_t end);

// `text` in lower case (ASCII).
std::string lowerCase(std::string_view text);

}  // namespace dlock::detail
