#include <doctest/doctest.h>

#include <string>

#include "trainsim/util/utf8.hpp"

using namespace trainsim;

// The boundaries of Unicode's table 3-7 (well-formed byte sequences), each side of each edge.
TEST_CASE("UTF-8 is well-formed exactly where Unicode's table 3-7 says") {
  CHECK(utf8_sequence_length("A", 0) == 1);
  CHECK(utf8_sequence_length("\x7f", 0) == 1);
  CHECK(utf8_sequence_length("\xc2\x80", 0) == 2);          // U+0080
  CHECK(utf8_sequence_length("\xdf\xbf", 0) == 2);          // U+07FF
  CHECK(utf8_sequence_length("\xe0\xa0\x80", 0) == 3);      // U+0800
  CHECK(utf8_sequence_length("\xed\x9f\xbf", 0) == 3);      // U+D7FF
  CHECK(utf8_sequence_length("\xee\x80\x80", 0) == 3);      // U+E000
  CHECK(utf8_sequence_length("\xef\xbf\xbf", 0) == 3);      // U+FFFF
  CHECK(utf8_sequence_length("\xf0\x90\x80\x80", 0) == 4);  // U+10000
  CHECK(utf8_sequence_length("\xf4\x8f\xbf\xbf", 0) == 4);  // U+10FFFF
  CHECK(utf8_sequence_length("\xf1\x80\x80\x80", 0) == 4);  // U+40000 (F1..F3 leads)
  CHECK(utf8_sequence_length("\xf3\xbf\xbf\xbf", 0) == 4);  // U+FFFFF
  CHECK(utf8_sequence_length("\xed\x80\x80", 0) == 3);      // U+D000, below the surrogates
  // not well-formed
  CHECK(utf8_sequence_length("\x80", 0) == 0);              // a continuation byte alone
  CHECK(utf8_sequence_length("\xc0\xaf", 0) == 0);          // overlong '/'
  CHECK(utf8_sequence_length("\xc1\xbf", 0) == 0);          // overlong U+007F
  CHECK(utf8_sequence_length("\xe0\x9f\xbf", 0) == 0);      // overlong U+07FF
  CHECK(utf8_sequence_length("\xed\xa0\x80", 0) == 0);      // surrogate U+D800
  CHECK(utf8_sequence_length("\xf0\x8f\xbf\xbf", 0) == 0);  // overlong U+FFFF
  CHECK(utf8_sequence_length("\xf4\x90\x80\x80", 0) == 0);  // U+110000
  CHECK(utf8_sequence_length("\xf5\x80\x80\x80", 0) == 0);
  CHECK(utf8_sequence_length("\xff", 0) == 0);
  CHECK(utf8_sequence_length("\xc2", 0) == 0);  // cut short
  CHECK(utf8_sequence_length("\xe2\x82", 0) == 0);
  CHECK(utf8_sequence_length("\xe2\x28\xa1", 0) == 0);  // a bad continuation
  CHECK(utf8_sequence_length("\xe2\x82\x28", 0) == 0);  // a bad third byte
  CHECK(utf8_sequence_length("\xf0\x90\x80\x7f", 0) == 0);  // a bad fourth byte
}

TEST_CASE("the first byte that is not UTF-8 is found where it is") {
  CHECK_FALSE(first_invalid_utf8("").has_value());
  CHECK_FALSE(first_invalid_utf8("tokens = \xe2\x82\xac 3 \xf0\x9f\x98\x80").has_value());
  CHECK(first_invalid_utf8("ab\xe2\x82\xac\xff").value() == 5);
  CHECK(first_invalid_utf8(std::string("a\0\xc0", 3)).value() == 2);  // NUL is UTF-8
}
