// Validators for the programs' command-line options whose messages a person can read:
// CLI11's PositiveNumber reports its range up to the largest double, a 310-digit number.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace cnn::apps {

// A whole number of at least `minimum`: "must be a whole number >= 1, got 0".
inline CLI::Validator at_least(int64_t minimum) {
  const std::string wanted = "a whole number >= " + std::to_string(minimum);
  return CLI::Validator(
      [minimum, wanted](std::string& text) -> std::string {
        size_t used = 0;
        long long value = 0;
        try {
          value = std::stoll(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != text.size() || value < minimum) return "must be " + wanted + ", got " + text;
        return {};
      },
      wanted);
}

// A probability that leaves something: a number in [0, 1), "must be a number in [0, 1), got 1.5".
inline CLI::Validator probability() {
  const std::string wanted = "a number in [0, 1)";
  return CLI::Validator(
      [wanted](std::string& text) -> std::string {
        size_t used = 0;
        double value = -1;
        try {
          value = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != text.size() || !(value >= 0 && value < 1)) return "must be " + wanted + ", got " + text;
        return {};
      },
      wanted);
}

}  // namespace cnn::apps
