// SPDX-License-Identifier: Apache-2.0
#include "dlock/core/Token.h"

#include <sys/random.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "dlock/LockError.h"
#include "dlock/detail/Fork.h"

namespace dlock {
namespace {

constexpr std::size_t kTokenBytes = 16;  // 128 bits

// Kernel randomness fetched in blocks, so an acquisition costs no system call. A forked child
// must never reuse its parent's unread bytes (two processes would share tokens), so a block
// filled in another fork generation is emptied first.
struct RandomBlock {
  std::array<std::uint8_t, 4096> bytes{};
  std::size_t used = bytes.size();
  std::uint64_t generation = 0;

  void refill() {
    std::size_t filled = 0;
    while (filled < bytes.size()) {
      const ssize_t got = getrandom(bytes.data() + filled, bytes.size() - filled, 0);
      if (got < 0) {
        if (errno == EINTR) continue;
        throw LockError(std::string("dlock: getrandom failed: ") + std::strerror(errno));
      }
      filled += static_cast<std::size_t>(got);
    }
    used = 0;
  }

  const std::uint8_t* take(std::size_t count) {
    const std::uint64_t current = detail::forkGeneration();
    if (generation != current) {
      generation = current;
      used = bytes.size();
    }
    if (bytes.size() - used < count) refill();
    const std::uint8_t* out = bytes.data() + used;
    used += count;
    return out;
  }
};

RandomBlock& threadBlock() {
  static thread_local RandomBlock block;
  return block;
}

// Each byte's two hex digits, so a token is written two characters at a time.
constexpr std::array<std::array<char, 2>, 256> hexPairs() {
  constexpr char kHex[] = "0123456789abcdef";
  std::array<std::array<char, 2>, 256> pairs{};
  for (std::size_t byte = 0; byte < pairs.size(); ++byte) pairs[byte] = {kHex[byte >> 4], kHex[byte & 0xf]};
  return pairs;
}

}  // namespace

std::string generateToken() {
  static constexpr std::array<std::array<char, 2>, 256> kHexPairs = hexPairs();
  const std::uint8_t* bytes = threadBlock().take(kTokenBytes);
  std::string token(kTokenBytes * 2, '\0');
  char* out = token.data();
  for (std::size_t i = 0; i < kTokenBytes; ++i) std::memcpy(out + 2 * i, kHexPairs[bytes[i]].data(), 2);
  return token;
}

}  // namespace dlock
