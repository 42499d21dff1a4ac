// cnn::Error, the one exception type of the engine. Its message says what went wrong, where (op and
// shapes, file and line, path) and what to do about it.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace cnn {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}
}  // namespace detail

}  // namespace cnn

// Throws cnn::Error with the streamed parts as its message when cond is false.
#define CNN_CHECK(cond, ...)                                      \
  do {                                                            \
    if (!(cond)) throw ::cnn::Error(::cnn::detail::concat(__VA_ARGS__)); \
  } while (0)
