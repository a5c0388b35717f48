#pragma once
// Well-formed UTF-8 (Unicode 15, table 3-7: no overlong forms, no surrogates, nothing above
// U+10FFFF), for the readers that must refuse other bytes and the writers that replace them.
#include <cstddef>
#include <optional>
#include <string_view>

namespace trainsim {

// The length (1 to 4) of the well-formed UTF-8 sequence that starts at text[pos], or 0 when the
// bytes there are not one (pos < text.size()).
std::size_t utf8_sequence_length(std::string_view text, std::size_t pos);

// The offset of the first byte that does not begin a well-formed sequence; none for valid UTF-8.
std::optional<std::size_t> first_invalid_utf8(std::string_view text);

}  // namespace trainsim
