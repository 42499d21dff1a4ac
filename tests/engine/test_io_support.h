// Helpers shared by the tests that write files (tensor files, checkpoints, logs): a scratch folder, tensors of random bits in
// every dtype (NaN payloads, infinities and subnormals included, so that a round trip must be
// bitwise), and bitwise comparison.
#pragma once
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/cnn.h"
#include "engine/io/named_tensors.h"

namespace io_test {

// A fresh, empty folder under the system's temporary directory, removed at the end of the scope.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : path_(std::filesystem::temp_directory_path() / ("cnn_test_" + name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::filesystem::path operator/(const std::string& file) const { return path_ / file; }
  operator const std::filesystem::path&() const { return path_; }
  std::string string() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// The whole content of a file.
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every byte drawn from a small xorshift generator.
inline cnn::Tensor random_bits(const cnn::Shape& shape, cnn::DType dt, uint64_t seed) {
  cnn::Tensor t = cnn::Tensor::empty(shape, dt);
  auto* bytes = static_cast<unsigned char*>(t.data());
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < t.nbytes(); ++i) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    bytes[i] = static_cast<unsigned char>(state >> 24);
  }
  return t;
}

inline bool same_bits(const cnn::Tensor& a, const cnn::Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

constexpr cnn::DType kAllDTypes[] = {cnn::DType::f32, cnn::DType::f64, cnn::DType::f16, cnn::DType::bf16,
                                     cnn::DType::i32, cnn::DType::i64, cnn::DType::u8};

// One tensor of each dtype with assorted ranks (scalar, vector, 4-D, empty).
inline cnn::io::NamedTensors every_dtype_tensors() {
  cnn::io::NamedTensors tensors;
  uint64_t seed = 1;
  for (cnn::DType dt : kAllDTypes) {
    const std::string base = std::string("layer1.0.") + cnn::dtype_name(dt);
    tensors.emplace_back(base + ".weight", random_bits({3, 2, 2, 5}, dt, seed++));
    tensors.emplace_back(base + ".bias", random_bits({7}, dt, seed++));
  }
  tensors.emplace_back("scalar", random_bits({}, cnn::DType::f64, seed++));
  tensors.emplace_back("empty", cnn::Tensor::empty({0, 4}, cnn::DType::f32));
  return tensors;
}

inline void check_same_tensors(const cnn::io::NamedTensors& got, const cnn::io::NamedTensors& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("tensor " << want[i].first);
    CHECK(got[i].first == want[i].first);
    CHECK(same_bits(got[i].second, want[i].second));
  }
}

}  // namespace io_test
