// SPDX-License-Identifier: Apache-2.0
#include "Digest.h"

#include <array>
#include <cstdint>

namespace dlock::detail {
namespace {

// SHA-1 as FIPS 180-4 §6.1 gives it. Written here rather than taken from OpenSSL: OpenSSL's
// digests go through its one-time initialisation and its locks (the provider store), which a
// child forked while a parent thread was inside them waits on for ever.
class Sha1 {
 public:
  void update(std::string_view data) {
    for (const char c : data) {
      block_[filled_++] = static_cast<std::uint8_t>(c);
      if (filled_ == block_.size()) compress();
    }
    length_ += data.size();
  }

  std::array<std::uint8_t, 20> finish() {
    const std::uint64_t bits = length_ * 8;
    block_[filled_++] = 0x80;
    if (filled_ > 56) {
      while (filled_ < block_.size()) block_[filled_++] = 0;
      compress();
    }
    while (filled_ < 56) block_[filled_++] = 0;
    for (int shift = 56; shift >= 0; shift -= 8) block_[filled_++] = static_cast<std::uint8_t>(bits >> shift);
    compress();
    std::array<std::uint8_t, 20> digest{};
    for (std::size_t i = 0; i < digest.size(); ++i) {
      digest[i] = static_cast<std::uint8_t>(state_[i / 4] >> (24 - 8 * (i % 4)));
    }
    return digest;
  }

 private:
  static std::uint32_t rotl(std::uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

  void compress() {
    std::array<std::uint32_t, 80> w{};
    for (std::size_t t = 0; t < 16; ++t) {
      w[t] = std::uint32_t{block_[4 * t]} << 24 | std::uint32_t{block_[4 * t + 1]} << 16 |
             std::uint32_t{block_[4 * t + 2]} << 8 | std::uint32_t{block_[4 * t + 3]};
    }
    for (std::size_t t = 16; t < 80; ++t) w[t] = rotl(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1);
    std::uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3], e = state_[4];
    for (std::size_t t = 0; t < 80; ++t) {
      std::uint32_t f = 0;
      std::uint32_t k = 0;
      if (t < 20) {
        f = (b & c) | (~b & d), k = 0x5a827999U;
      } else if (t < 40) {
        f = b ^ c ^ d, k = 0x6ed9eba1U;
      } else if (t < 60) {
        f = (b & c) | (b & d) | (c & d), k = 0x8f1bbcdcU;
      } else {
        f = b ^ c ^ d, k = 0xca62c1d6U;
      }
      const std::uint32_t next = rotl(a, 5) + f + e + k + w[t];
      e = d, d = c, c = rotl(b, 30), b = a, a = next;
    }
    state_[0] += a, state_[1] += b, state_[2] += c, state_[3] += d, state_[4] += e;
    filled_ = 0;
  }

  std::array<std::uint32_t, 5> state_{0x67452301U, 0xefcdab89U, 0x98badcfeU, 0x10325476U, 0xc3d2e1f0U};
  std::array<std::uint8_t, 64> block_{};
  std::size_t filled_ = 0;
  std::uint64_t length_ = 0;
};

}  // namespace

std::string sha1Hex(std::string_view data) {
  Sha1 sha;
  sha.update(data);
  const auto digest = sha.finish();
  return hexOf(std::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()));
}

std::string hexOf(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    out += kHex[byte >> 4];
    out += kHex[byte & 0xfU];
  }
  return out;
}

}  // namespace dlock::detail
