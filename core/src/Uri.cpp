#include "dlock/core/Uri.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <functional>
#include <optional>
#include <utility>

#include "dlock/LockError.h"

namespace dlock {
namespace {

// ---- The options of each scheme ---------------------------------------------------------------

constexpr UriOption kConnectTimeout{"connect_timeout", UriOptionType::Duration, "timeout of a connection attempt"};
constexpr UriOption kCommandTimeout{"command_timeout", UriOptionType::Duration, "timeout of a command's reply"};
constexpr UriOption kPoolSize{"pool_size", UriOptionType::PositiveCount, "connections kept per server"};
constexpr UriOption kPoolWait{"pool_wait", UriOptionType::Duration, "how long a call waits for a free connection"};
constexpr UriOption kPrefix{"prefix", UriOptionType::Text, "the prefix of the Redis keys (default dlock:)"};
constexpr UriOption kSentinelUser{"sentinel_user", UriOptionType::Text, "the sentinels' ACL user"};
constexpr UriOption kSentinelPassword{"sentinel_password", UriOptionType::Secret, "the sentinels' password"};
constexpr UriOption kWaitReplicas{"wait_replicas", UriOptionType::Count,
                                  "replicas that must acknowledge an acquisition (WAIT)"};
constexpr UriOption kWaitTimeout{"wait_timeout", UriOptionType::Duration, "how long an acquisition waits for them"};
constexpr UriOption kNodeTimeout{"node_timeout", UriOptionType::Duration,
                                 "how long the redlock waits for a node; a node's default timeouts"};

struct SchemeOptions {
  std::string_view scheme;
  std::vector<UriOption> options;
};

const std::vector<SchemeOptions>& schemeTable() {
  static const std::vector<SchemeOptions> table = {
      {"memory", {}},
      {"redis", {kConnectTimeout, kCommandTimeout, kPoolSize, kPoolWait, kPrefix}},
      {"redis+sentinel",
       {kConnectTimeout, kCommandTimeout, kPoolSize, kPoolWait, kPrefix, kSentinelUser, kSentinelPassword,
        kWaitReplicas, kWaitTimeout}},
      {"redis+cluster", {kConnectTimeout, kCommandTimeout, kPoolSize, kPoolWait, kPrefix}},
      {"redlock", {kConnectTimeout, kCommandTimeout, kPoolSize, kPoolWait, kPrefix, kNodeTimeout}},  // h1,h2,...
  };
  return table;
}

const SchemeOptions* findScheme(std::string_view scheme) {
  for (const auto& entry : schemeTable()) {
    if (entry.scheme == scheme) return &entry;
  }
  return nullptr;
}

// The option `name` as `scheme` (a redlock member when `member`) takes it; null when it does not.
const UriOption* acceptedOption(std::string_view scheme, std::string_view name, bool member) {
  for (const auto& option : uriOptions(scheme)) {
    if (option.name == name) return &option;
  }
  return member && name == kNodeTimeout.name ? &kNodeTimeout : nullptr;
}

// The option `name` of any scheme, for redaction (which runs before the scheme is known).
const UriOption* anyOption(std::string_view name) {
  for (const auto& entry : schemeTable()) {
    for (const auto& option : entry.options) {
      if (option.name == name) return &option;
    }
  }
  return nullptr;
}

std::string optionList(const std::vector<UriOption>& options, bool member) {
  std::string names;
  for (const auto& option : options) names += (names.empty() ? "" : ", ") + std::string(option.name);
  const auto isNodeTimeout = [](const UriOption& option) { return option.name == kNodeTimeout.name; };
  if (member && std::none_of(options.begin(), options.end(), isNodeTimeout)) {
    names += (names.empty() ? "" : ", ") + std::string(kNodeTimeout.name);
  }
  return names.empty() ? "none" : names;
}

// ---- Values -----------------------------------------------------------------------------------

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool parseInt(std::string_view text, long long& value) {
  if (text.empty()) return false;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return ec == std::errc() && ptr == end;
}

std::optional<std::chrono::milliseconds> durationValue(std::string_view text) {
  long long scale = 1;
  if (text.size() > 2 && text.substr(text.size() - 2) == "ms") {
    text.remove_suffix(2);
  } else if (text.size() > 1 && text.back() == 's') {
    text.remove_suffix(1);
    scale = 1000;
  }
  long long value = 0;
  if (!parseInt(text, value) || value <= 0 || value > 86400000LL) return std::nullopt;
  return std::chrono::milliseconds(value * scale);
}

std::optional<std::size_t> countValue(std::string_view text, long long least) {
  long long value = 0;
  if (!parseInt(text, value) || value < least || value > 100000) return std::nullopt;
  return static_cast<std::size_t>(value);
}

std::string lowerCase(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// ---- What may hold a password -----------------------------------------------------------------

// [begin, end) of the text, shown as "***" (also when empty, so that the mask is seen).
struct Span {
  std::size_t begin = 0;
  std::size_t end = 0;
  bool password = false;  // a userinfo password or a secret option's value (not an unknown option's)
};

bool isSchemeChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '+' || c == '-' || c == '.';
}

// The length of "scheme://" at `pos`, or 0.
std::size_t schemeLength(std::string_view text, std::size_t pos, std::size_t end) {
  std::size_t i = pos;
  while (i < end && isSchemeChar(text[i])) ++i;
  return i > pos && text.substr(0, end).substr(i, 3) == "://" ? i + 3 - pos : 0;
}

// Where each URI in `text` starts: 0, and after each ';' that is followed by "scheme://" (a
// member of a redlock list; a ';' alone may be a password's).
std::vector<std::size_t> uriStarts(std::string_view text) {
  std::vector<std::size_t> starts{0};
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
        // A password may hold '&' and ';': the value runs on to the next "&name=" or list member,
        // never ending before its first byte (a password may start with either).
        const std::size_t valueStart = pos + eq + 1;
        pairEnd = valueStart;
        while (pairEnd < text.size() &&
               (pairEnd == valueStart ||
                !(startsOption(text, pairEnd, text.size()) ||
                  (text[pairEnd] == ';' && schemeLength(text, pairEnd + 1, text.size()) > 0)))) {
          ++pairEnd;
        }
        spans.push_back({valueStart, pairEnd, option != nullptr});
      }
    }
    pos = pairEnd + 1;
  }
}

// Every part of `text` that may hold a password, in order, overlaps merged.
std::vector<Span> secretSpans(std::string_view text) {
  std::vector<Span> spans;
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
    // The userinfo runs to the last '@': a password may hold '@', '/', '?', ':' and the rest. Not
    // to one inside a secret option's value, masked anyway (unless the value starts there).
    const auto insideSecret = [&](std::size_t pos) {
      return std::any_of(query.begin(), query.end(),
                         [&](const Span& span) { return span.password && span.begin < pos && pos < span.end; });
    };
    auto at = text.substr(0, end).rfind('@');
    while (at != std::string_view::npos && at >= userStart && insideSecret(at)) {
      at = at == 0 ? std::string_view::npos : text.substr(0, at).rfind('@');
    }
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

// `text` [begin, end) with the spans masked.
std::string masked(std::string_view text, const std::vector<Span>& spans, std::size_t begin, std::size_t end) {
  std::string out;
  std::size_t pos = begin;
  for (const Span& span : spans) {
    const bool inside = span.begin == span.end ? span.begin >= begin && (span.begin < end || span.begin == text.size())
                                               : span.begin < end && span.end > begin;
    if (!inside) continue;
    out.append(text.substr(pos, std::max(span.begin, begin) - pos));
    out += "***";
    pos = std::min(span.end, end);
  }
  out.append(text.substr(pos, end - pos));
  return out;
}

// ---- The parser -------------------------------------------------------------------------------

// Parses one URI, or a redlock list and its members, with the masks of the whole text: what an
// error quotes is never a part that redactUri masks.
class UriParser {
 public:
  explicit UriParser(std::string_view whole)
      : whole_(whole), spans_(secretSpans(whole)), redacted_(masked(whole, spans_, 0, whole.size())) {}

  // `text` lies within the whole; `member` is its number in a redlock list, 0 for the whole.
  ParsedUri parse(std::string_view text, std::size_t member);

 private:
  [[noreturn]] void fail(const std::string& problem) const {
    const std::string where = member_ == 0 ? "" : "member " + std::to_string(member_) + ": ";
    // An '@' past the first '/' or '?' after the scheme: likely a password that holds one.
    const auto authorityEnd = current_.find_first_of("/?", std::min(current_.find("://") + 3, current_.size()));
    const bool misplacedAt =
        authorityEnd != std::string_view::npos && current_.find('@', authorityEnd) != std::string_view::npos;
    throw ConfigError("dlock: bad URI '" + redacted_ + "': " + where + problem +
                      (misplacedAt ? " (a password's '/', '?' and '@' are written %2F, %3F and %40)" : ""));
  }

  // `part` (a view into the whole) in quotes, or '***' when it overlaps what is masked.
  [[nodiscard]] std::string quote(std::string_view part) const {
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
    return "'" + std::string(part) + "'";
  }

  [[nodiscard]] std::string redact(std::string_view part) const {
    const auto begin = static_cast<std::size_t>(part.data() - whole_.data());
    return masked(whole_, spans_, begin, begin + part.size());
  }

  std::string percentDecode(std::string_view in, const char* what) const;
  UriHost parseHost(std::string_view text, int defaultPort) const;
  std::vector<UriHost> parseHosts(std::string_view text, int defaultPort) const;
  int parseDb(std::string_view text) const;
  void checkValue(const UriOption& option, std::string_view raw, const std::string& value) const;

  std::string_view whole_;
  std::vector<Span> spans_;
  std::string redacted_;
  std::size_t member_ = 0;     // the member being parsed, for messages
  std::string_view current_;   // its text
};

std::string UriParser::percentDecode(std::string_view in, const char* what) const {
  std::string out;
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) fail(std::string("truncated %-escape in the ") + what);
    const int high = hexValue(in[i + 1]);
    const int low = hexValue(in[i + 2]);
    if (high < 0 || low < 0) fail(std::string("bad %-escape in the ") + what);
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

UriHost UriParser::parseHost(std::string_view text, int defaultPort) const {
  UriHost host;
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

std::vector<UriHost> UriParser::parseHosts(std::string_view text, int defaultPort) const {
  std::vector<UriHost> hosts;
  std::size_t start = 0;
  while (true) {
    const auto comma = text.find(',', start);
    hosts.push_back(parseHost(text.substr(start, comma == std::string_view::npos ? comma : comma - start), defaultPort));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return hosts;
}

int UriParser::parseDb(std::string_view text) const {
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
      if (!durationValue(value)) fail(shown + " is not a positive duration (e.g. 250, 250ms, 2s)");
      break;
    case UriOptionType::Count:
      if (!countValue(value, 0)) fail(shown + " is not a count");
      break;
    case UriOptionType::PositiveCount:
      if (!countValue(value, 1)) fail(shown + " is not a count of at least 1");
      break;
    case UriOptionType::Text:
    case UriOptionType::Secret:
      break;
  }
}

ParsedUri UriParser::parse(std::string_view text, std::size_t member) {
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

  if (parsed.scheme == "memory") {
    if (!rest.empty()) fail("memory:// takes nothing after the scheme");
    return parsed;
  }
  if (parsed.scheme == "redlock" && rest.find("://") != std::string_view::npos) {
    std::size_t number = 0;
    std::size_t start = 0;
    while (start <= rest.size()) {
      const auto semi = rest.find(';', start);
      const auto memberText = rest.substr(start, semi == std::string_view::npos ? semi : semi - start);
      ++number;
      parsed.members.push_back(parse(memberText, number));
      member_ = member;
      current_ = text;
      if (semi == std::string_view::npos) break;
      start = semi + 1;
    }
    return parsed;
  }
  if (findScheme(parsed.scheme) == nullptr) {
    fail("unknown scheme " + quote(schemeText) +
         " (expected redis://, redis+sentinel://, redis+cluster://, redlock:// or memory://)");
  }
  const bool sentinel = parsed.scheme == "redis+sentinel";
  const bool cluster = parsed.scheme == "redis+cluster";

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
      const UriOption* option = acceptedOption(parsed.scheme, name, member != 0);
      if (option == nullptr) {
        const std::string scheme = parsed.scheme + "://" + (member != 0 ? " (a redlock member)" : "");
        fail((anyOption(name) != nullptr ? "option " + quote(name) + " does not apply to "
                                         : "unknown option " + quote(name) + " for ") +
             scheme + "; it takes " + optionList(uriOptions(parsed.scheme), member != 0));
      }
      parsed.options[std::string(name)] = percentDecode(pair.substr(eq + 1), "query");
      given.emplace_back(option, pair.substr(eq + 1));
      if (amp == std::string_view::npos) break;
      start = amp + 1;
    }
  }

  // Authority, then path.
  const auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  const std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  const auto at = authority.rfind('@');
  if (at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    const auto colon = userinfo.find(':');
    parsed.user = percentDecode(userinfo.substr(0, colon), "user");
    if (colon != std::string_view::npos) parsed.password = percentDecode(userinfo.substr(colon + 1), "password");
    if (colon == std::string_view::npos) {
      // redis://secret@host is the common "password only" spelling.
      parsed.password = parsed.user;
      parsed.user.clear();
    }
  }
  if (authority.empty()) fail("no host");
  parsed.hosts = parseHosts(authority, sentinel ? 26379 : 6379);
  if (parsed.scheme == "redis" && parsed.hosts.size() != 1) {
    fail("redis:// takes one host; use redis+sentinel://, redis+cluster:// or redlock:// for several");
  }

  if (sentinel) {
    const auto nextSlash = path.find('/');
    const std::string_view master = path.substr(0, nextSlash);
    if (master.empty()) fail("no master name (redis+sentinel://host:port/mastername)");
    // A password with a raw '/' would otherwise end up in the master name, shown by describe().
    if (master.find('@') != std::string_view::npos) fail("an '@' in the master name");
    parsed.masterName = std::string(master);
    if (nextSlash != std::string_view::npos) parsed.db = parseDb(path.substr(nextSlash + 1));
  } else if (!path.empty()) {
    if (cluster) fail("a cluster has only database 0; remove '/" + quote(path).substr(1));
    if (parsed.scheme == "redlock") fail("redlock:// takes no database; give member URIs instead");
    parsed.db = parseDb(path);
  }

  // The values, now, so a bad one fails at connect rather than at first use.
  for (const auto& [option, raw] : given) checkValue(*option, raw, parsed.options[std::string(option->name)]);
  return parsed;
}

}  // namespace

const std::vector<UriOption>& uriOptions(std::string_view scheme) {
  static const std::vector<UriOption> none;
  const SchemeOptions* entry = findScheme(scheme);
  return entry != nullptr ? entry->options : none;
}

std::string redactUri(std::string_view uri) { return masked(uri, secretSpans(uri), 0, uri.size()); }

std::vector<std::string> uriPasswords(std::string_view uri) {
  std::vector<std::string> passwords;
  for (const Span& span : secretSpans(uri)) {
    const std::string text(uri.substr(span.begin, span.end - span.begin));
    if (span.password && !text.empty() && std::find(passwords.begin(), passwords.end(), text) == passwords.end()) {
      passwords.push_back(text);
    }
  }
  return passwords;
}

ParsedUri parseUri(std::string_view uri) { return UriParser(uri).parse(uri, 0); }

std::chrono::milliseconds ParsedUri::duration(const std::string& name, std::chrono::milliseconds fallback) const {
  const auto it = options.find(name);
  if (it == options.end()) return fallback;
  const auto value = durationValue(it->second);
  if (!value) throw ConfigError("dlock: bad URI '" + redacted + "': option " + name + " is not a positive duration");
  return *value;
}

std::size_t ParsedUri::count(const std::string& name, std::size_t fallback) const {
  const auto it = options.find(name);
  if (it == options.end()) return fallback;
  const auto value = countValue(it->second, 0);
  if (!value) throw ConfigError("dlock: bad URI '" + redacted + "': option " + name + " is not a count");
  return *value;
}

std::string ParsedUri::text(const std::string& name, const std::string& fallback) const {
  const auto it = options.find(name);
  return it == options.end() ? fallback : it->second;
}

}  // namespace dlock
