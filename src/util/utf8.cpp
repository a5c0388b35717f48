#include "trainsim/util/utf8.hpp"

namespace trainsim {

std::size_t utf8_sequence_length(std::string_view text, std::size_t pos) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[pos + k]); };
  const auto b0 = byte(0);
  if (b0 < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80;  // the range of the second byte, narrowed where table 3-7 narrows it
  unsigned char hi = 0xbf;
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    n = 2;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    n = 3;
    if (b0 == 0xe0) lo = 0xa0;  // overlong below U+0800
    if (b0 == 0xed) hi = 0x9f;  // surrogates U+D800..U+DFFF
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    n = 4;
    if (b0 == 0xf0) lo = 0x90;  // overlong below U+10000
    if (b0 == 0xf4) hi = 0x8f;  // above U+10FFFF
  } else {
    return 0;  // a continuation byte, an overlong lead (0xc0, 0xc1) or 0xf5..0xff
  }
  if (pos + n > text.size()) return 0;
  if (byte(1) < lo || byte(1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (byte(k) < 0x80 || byte(k) > 0xbf) return 0;
  return n;
}

std::optional<std::size_t> first_invalid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto n = utf8_sequence_length(text, i);
    if (n == 0) return i;
    i += n;
  }
  return std::nullopt;
}

}  // namespace trainsim
