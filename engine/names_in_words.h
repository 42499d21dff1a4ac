// Lists of names as messages show them: the first few and how many more, so a message about
// 21,843 class names stays one readable line.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace cnn {

// "a, b, c" for short lists; "a, b, ..., h, ... 13 more" past `shown` names.
std::string names_in_words(const std::vector<std::string>& names, size_t shown = 8);

}  // namespace cnn
