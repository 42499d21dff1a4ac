// UTF-8 validation and the \xHH spelling of stray bytes (engine/io/utf8_text.h).
#include <doctest/doctest.h>

#include <initializer_list>
#include <string>

#include "engine/io/utf8_text.h"

using namespace cnn::io;

TEST_CASE("utf8: valid text passes unchanged, each invalid byte is spelled \\xHH") {
  for (const std::string& valid : std::initializer_list<std::string>{"", "plain", "caf\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x90\x88 cat", std::string("a\0b", 3)}) {
    CAPTURE(valid);
    CHECK(is_valid_utf8(valid));
    CHECK(printable_utf8(valid) == valid);
  }
  CHECK(printable_utf8("caf\xe9") == "caf\\xE9");                          // Latin-1
  CHECK(printable_utf8("\x80x") == "\\x80x");                              // a lone continuation byte
  CHECK(printable_utf8("\xc3") == "\\xC3");                                // cut after the lead byte
  CHECK(printable_utf8("\xc0\xaf") == "\\xC0\\xAF");                       // overlong '/'
  CHECK(printable_utf8("\xed\xa0\x80") == "\\xED\\xA0\\x80");              // a surrogate
  CHECK(printable_utf8("\xf4\x90\x80\x80") == "\\xF4\\x90\\x80\\x80");     // past U+10FFFF
  CHECK(printable_utf8("\xff\xc3\xa9") == "\\xFF\xc3\xa9");                // the valid part is kept
  for (const std::string& invalid : std::initializer_list<std::string>{"caf\xe9", "\x80", "\xc0\xaf", "\xed\xa0\x80", "\xfe"}) CHECK_FALSE(is_valid_utf8(invalid));
}
