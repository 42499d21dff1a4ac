// Text that is safe to write where UTF-8 is required (JSON, HTML, TensorBoard): file and class names
// are bytes from the file system (a folder "caf\xe9" made on a Latin-1 machine), and a JSON writer
// refuses such bytes with an exception. Every byte that is not part of a valid UTF-8 sequence is
// written as the four characters \xHH, so the name stays recognisable and the text is valid
// (train/log/json_text.h applies it to JSON documents).
#pragma once
#include <string>
#include <string_view>

namespace cnn::io {

// Whether `text` is valid UTF-8 (no stray continuation bytes, overlong forms, surrogates or code
// points past U+10FFFF).
bool is_valid_utf8(std::string_view text);

// `text` unchanged when it is valid UTF-8; otherwise each invalid byte spelled \xHH.
std::string printable_utf8(std::string_view text);

}  // namespace cnn::io
