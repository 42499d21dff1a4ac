// The message of the cnn::Error that a piece of code throws, for tests that check what a refusal
// says ("(no error)" when it throws none).
#pragma once
#include <functional>
#include <string>

#include "engine/error.h"

namespace cnn::testing {

inline std::string error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace cnn::testing
