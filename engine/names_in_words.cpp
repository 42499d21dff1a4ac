#include "names_in_words.h"

namespace cnn {

std::string names_in_words(const std::vector<std::string>& names, size_t shown) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < shown; ++i) text += (i ? ", " : "") + names[i];
  if (names.size() > shown) text += ", ... " + std::to_string(names.size() - shown) + " more";
  return text;
}

}  // namespace cnn
