// SPDX-License-Identifier: Apache-2.0
#include "uri/UriRedaction.h"

#include <algorithm>
#include <cctype>

#include "dlock/uri.h"
#include "uri/UriScheme.h"

namespace dlock {
namespace detail {

std::string lowerCase(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

namespace {

bool isSchemeChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '+' || c == '-' || c == '.';
}

// The length of "scheme://" at `pos`, or 0.
std::size_t schemeLength(std::string_view text, std::size_t pos, std::size_t end) {
  std::size_t i = pos;
  while (i < end && isSchemeChar(text[i])) ++i;
  return i > pos && text.substr(0, end).substr(i, 3) == "://" ? i + 3 - pos : 0;
}

// Where each URI in `text` starts: 0, and in a redlock list after each ';' that is followed by
// "scheme://" (a member; a ';' alone may be a password's). Other schemes have no members: there a
// ";x://" can only be a password's.
std::vector<std::size_t> uriStarts(std::string_view text) {
  std::vector<std::size_t> starts{0};
  if (lowerCase(text.substr(0, std::min<std::size_t>(text.size(), 10))) != "redlock://") return starts;
  for (auto semi = text.find(';'); semi != std::string_view::npos; semi = text.find(';', semi + 1)) {
    if (schemeLength(text, semi + 1, text.size()) > 0) starts.push_back(semi + 1);
  }
  return starts;
}

// Whether `text` at `pos` starts "&name=" with a name shaped like an option's, where a secret
// value that holds '&' ends.
bool startsOption(std::string_view text, std::size_t pos, std::size_t end) {
  if (pos >= end || text[pos] != '&') return false;
  std::size_t i = pos + 1;
  while (i < end && (std::islower(static_cast<unsigned char>(text[i])) != 0 ||
                     std::isdigit(static_cast<unsigned char>(text[i])) != 0 || text[i] == '_')) {
    ++i;
  }
  return i > pos + 1 && i < end && text[i] == '=';
}

// The query of the URI in [from, end): values that are not a known option's plain value.
void querySpans(std::string_view text, std::size_t from, std::size_t end, std::vector<Span>& spans) {
  const auto question = text.substr(0, end).find('?', from);
  if (question == std::string_view::npos) return;
  std::size_t pos = question + 1;
  while (pos < end) {
    std::size_t pairEnd = std::min(text.substr(0, end).find('&', pos), end);
    const std::string_view pair = text.substr(pos, pairEnd - pos);
    const auto eq = pair.find('=');
    if (eq != std::string_view::npos) {
      const UriOption* option = anyOption(pair.substr(0, eq));
      if (option == nullptr || option->type == UriOptionType::Secret) {
        // A password may hold '&', ';' and whole "scheme://" spellings: the value runs on to the
        // next "&name=", past any list members (a password holding ";redis://" splits the list
        // inside itself), never ending before its first byte (a password may start with '&').
        const std::size_t valueStart = pos + eq + 1;
        pairEnd = valueStart;
        while (pairEnd < text.size() && (pairEnd == valueStart || !startsOption(text, pairEnd, text.size()))) {
          ++pairEnd;
        }
        spans.push_back({valueStart, pairEnd, option != nullptr});
      }
    }
    pos = pairEnd + 1;
  }
}

}  // namespace

namespace {

// Each place in `text` that may hold a password, unsorted and unmerged; a list whose members
// hold more than one userinfo also gets one span over all of them (password false), since a raw
// password may begin in any member's userinfo and end at any later '@'
// ("redis://:@x;redis://y@" may be the one password "@x;redis://y").
std::vector<Span> candidateSpans(std::string_view text) {
  std::vector<Span> spans;
  std::size_t userinfoSpans = 0;
  Span userinfoCover{std::string_view::npos, 0, false};
  const std::vector<std::size_t> starts = uriStarts(text);
  std::size_t previousUserStart = 0;
  // Where a password may have begun in the members before this one that have no '@' of their own:
  // a password holding ";scheme://" splits the list inside itself, and its head looks like such a
  // member ("redis://:secret;x://more@host", "redis://secret;x://@host"). npos after an '@'.
  std::size_t openPasswordStart = std::string_view::npos;
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const std::size_t begin = starts[i];
    const std::size_t end = i + 1 < starts.size() ? starts[i + 1] - 1 : text.size();  // before the ';'
    const auto marker = text.substr(begin, end - begin).find("://");
    const std::size_t outerStart = marker == std::string_view::npos ? begin : begin + marker + 3;
    std::size_t userStart = outerStart;
    if (marker != std::string_view::npos && lowerCase(text.substr(begin, marker)) == "redlock") {
      while (const std::size_t nested = schemeLength(text, userStart, end)) userStart += nested;  // its first member
    }
    std::vector<Span> query;
    querySpans(text, userStart, end, query);
    // The userinfo runs to the last '@': a password may hold '@', '/', '?', ':' and the rest. Even
    // to one inside a secret option's value: a raw '?' in a password makes what follows it look
    // like a query ("redis://:a/b?sentinel_password=c@h" may be the password "a/b?sentinel_password=c").
    // The parser refuses any raw '@' in a query, so this only ever masks more of an error message.
    const auto at = text.substr(0, end).rfind('@');
    if (at != std::string_view::npos && at >= userStart) {
      // The user is shown, unless it holds an '@': then "secret@host:port@..." may be a password
      // alone followed by more '@'s, and the user the password.
      const auto colon = text.substr(0, at).find(':', userStart);
      const bool plainUser =
          colon != std::string_view::npos && text.substr(userStart, colon - userStart).find('@') == std::string_view::npos;
      std::size_t passwordStart = plainUser ? colon + 1 : userStart;
      // An '@' where the password starts (nothing, or nothing but other '@'s, to mask before it)
      // may end a password that swallowed the syntax before it: "user:@host" may be the password
      // "user:"; "redlock://redis://@host" the password "redis://"; "://@host" right after a
      // list's ';' a password holding ";scheme://". Mask back to where that one starts.
      const auto atPasswordStart = [&] { return text[passwordStart] == '@'; };
      if (atPasswordStart()) passwordStart = userStart;
      if (atPasswordStart()) passwordStart = outerStart;
      if (atPasswordStart() && i > 0) passwordStart = previousUserStart;
      passwordStart = std::min(passwordStart, openPasswordStart);
      spans.push_back({passwordStart, at, true});
      ++userinfoSpans;
      userinfoCover.begin = std::min(userinfoCover.begin, passwordStart);
      userinfoCover.end = at;
      openPasswordStart = std::string_view::npos;
    } else if (openPasswordStart == std::string_view::npos) {
      // Even "redis://h1:1" may be a password's head: masked (from its port on) if a later member
      // has an '@'. Messages about such a list say less; they never show a password.
      const auto colon = text.substr(0, end).find(':', userStart);
      openPasswordStart = colon != std::string_view::npos ? colon + 1 : userStart;
    }
    spans.insert(spans.end(), query.begin(), query.end());
    previousUserStart = userStart;
  }
  if (userinfoSpans > 1) spans.push_back(userinfoCover);
  return spans;
}

}  // namespace

std::vector<Span> secretSpans(std::string_view text) {
  std::vector<Span> spans = candidateSpans(text);
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  std::vector<Span> merged;
  for (const Span& span : spans) {
    if (!merged.empty() && span.begin <= merged.back().end) {
      merged.back().end = std::max(merged.back().end, span.end);
      merged.back().password = merged.back().password || span.password;
    } else {
      merged.push_back(span);
    }
  }
  return merged;
}

void appendShown(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f) {
      out += c;
    } else {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    }
  }
}

std::string shown(std::string_view text) {
  std::string out;
  appendShown(out, text);
  return out;
}

std::string masked(std::string_view text, const std::vector<Span>& spans, std::size_t begin, std::size_t end) {
  std::string out;
  std::size_t pos = begin;
  for (const Span& span : spans) {
    const bool inside = span.begin == span.end ? span.begin >= begin && (span.begin < end || span.begin == text.size())
                                               : span.begin < end && span.end > begin;
    if (!inside) continue;
    appendShown(out, text.substr(pos, std::max(span.begin, begin) - pos));
    out += "***";
    pos = std::min(span.end, end);
  }
  appendShown(out, text.substr(pos, end - pos));
  return out;
}

}  // namespace detail

std::string redactUri(std::string_view uri) {
  return detail::masked(uri, detail::secretSpans(uri), 0, uri.size());
}

std::vector<std::string> uriPasswords(std::string_view uri) {
  std::vector<std::string> passwords;
  for (const detail::Span& span : detail::candidateSpans(uri)) {
    const std::string text(uri.substr(span.begin, span.end - span.begin));
    if (span.password && !text.empty() && std::find(passwords.begin(), passwords.end(), text) == passwords.end()) {
      passwords.push_back(text);
    }
  }
  return passwords;
}

}  // namespace dlock
