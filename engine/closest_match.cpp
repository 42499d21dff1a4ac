// Edit distance by dynamic programming over one row, and the nearest candidate under it.
#include "engine/closest_match.h"

#include <algorithm>
#include <cctype>

namespace cnn {

namespace {
std::string lowercase(const std::string& s) {
  std::string out;
  for (char c : s) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}
}  // namespace

int edit_distance(const std::string& a_text, const std::string& b_text) {
  const std::string a = lowercase(a_text), b = lowercase(b_text);
  // d[i][j]: distance between the first i letters of a and the first j of b
  std::vector<std::vector<int>> d(a.size() + 1, std::vector<int>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);  // two neighbours swapped
    }
  return d[a.size()][b.size()];
}

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string lower_word = lowercase(word);
  std::string best;
  int best_distance = 0;
  for (const std::string& c : candidates) {
    const std::string lower_candidate = lowercase(c);
    const bool prefix = std::min(word.size(), c.size()) >= 3 &&
                        (lower_word.rfind(lower_candidate, 0) == 0 || lower_candidate.rfind(lower_word, 0) == 0);
    if (prefix) return c;  // "optimizer" for "optim", "batch" for "batch_size"
    const int d = edit_distance(word, c);
    if (best.empty() || d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  const int allowed = std::max(1, static_cast<int>(std::max(word.size(), best.size()) / 3));
  const bool close = best_distance <= allowed && static_cast<int>(std::min(word.size(), best.size())) - best_distance >= 1;
  return close ? best : "";
}

}  // namespace cnn
