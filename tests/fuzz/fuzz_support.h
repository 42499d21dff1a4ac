// What every harness in tests/fuzz shares: a clean refusal (cnn::Error) counts as success, a
// property that accepted input must satisfy aborts when it does not, and parsers that take a path
// get the input written to a file in memory (/dev/shm when present) that is removed at exit.
//
// Everything else is a finding that libFuzzer records as a crash: a sanitizer report, a signal, an
// exception of another type escaping the harness (std::terminate aborts), a run longer than
// -timeout, or an allocation beyond -malloc_limit_mb / -rss_limit_mb.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/error.h"
#include "engine/tensor.h"

namespace cnn::fuzz {

void show_refusal(const Error& refusal);

// Runs `parse` and swallows the cnn::Error it may throw: that is the parser refusing bad input.
// With CNN_FUZZ_SHOW_REFUSALS set, the refusal's message is printed (to check that seeds are
// accepted: `CNN_FUZZ_SHOW_REFUSALS=1 fuzz_idx corpus/fuzz_idx/*`).
template <class Parse>
void refused_cleanly_or_accepted(Parse&& parse) {
  try {
    parse();
  } catch (const Error& e) {
    show_refusal(e);
  }
}

// Aborts with `what` when an accepted input broke a property the parser promises.
void require(bool holds, const char* what);

// Reads every byte of a tensor's data, so that ASan reports a tensor whose storage is shorter than
// its shape and dtype say.
void read_every_byte(const Tensor& tensor);

// The input as a file, for parsers that open a path. One folder per process, so that parallel
// fuzzing jobs do not overwrite each other's inputs.
class InputFile {
 public:
  // Path of `name` in this process's folder (created on first use).
  static std::string path_of(const std::string& name);
  // Writes the bytes to `name` ("a.png", "sub/b.jpg") in that folder and returns its path.
  static std::string write(const std::string& name, const uint8_t* data, size_t size);
};

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace cnn::fuzz
