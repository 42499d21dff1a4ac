// cnn::Error, the one exception type of every layer, from the kernels up: whatever fails (a bad
// argument, a cuDNN or cuBLAS status, a kernel launch, a config key, a data file) throws it, with a
// message that says what went wrong, where (op and shapes, file and line, path) and what to do.
//   CNN_CHECK(cond, parts...)  throws when cond is false; the parts are streamed into the message;
//   CNN_FAIL(parts...)         throws unconditionally (a switch's default, an unreachable branch).
// Plain C++17: kernel files (.cu) include it under nvcc and under the host emulation.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace cnn {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A library under a kernel (cuBLAS, cuDNN) could not allocate device memory of its own. The engine
// gives its cache back to the system and tries the kernel once more (engine/allocator.h,
// run_with_library_memory_retry) before it reports out of memory.
class LibraryOutOfMemory : public Error {
 public:
  using Error::Error;
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

#define CNN_FAIL(...) throw ::cnn::Error(::cnn::detail::concat(__VA_ARGS__))

#define CNN_CHECK(cond, ...)           \
  do {                                 \
    if (!(cond)) CNN_FAIL(__VA_ARGS__); \
  } while (0)
