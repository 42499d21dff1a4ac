// "Did you mean ...?": the closest valid name to a misspelt one, by edit distance.
#pragma once
#include <string>
#include <vector>

namespace cnn {

// Edit distance counting insertions, deletions, substitutions and swaps of neighbouring letters
// (optimal string alignment), case-insensitive.
int edit_distance(const std::string& a, const std::string& b);
// The candidate closest to `word`, or "" when none is close enough to be a likely typo: one is a
// prefix of the other (at least 3 letters), or at most a third of the letters are wrong.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace cnn
