// Test fixtures for data/: a temporary folder removed at the end of the test, files written into
// it, and synthetic images whose pixel values are known functions of their position.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "data/image.h"
#include "error_message.h"

namespace cnn::data::test {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  // Writes `bytes` to path()/relative (creating folders) and returns the full path.
  std::string write(const std::string& relative, const std::vector<uint8_t>& bytes) const;
  std::string write_text(const std::string& relative, const std::string& text) const;

 private:
  std::filesystem::path path_;
};

// h x w x c with pixel (y, x, ch) = (seed + 7 y + 13 x + 50 ch) mod 256: every pixel distinct
// enough to tell crops, flips and channel orders apart.
Image pattern_image(int h, int w, int c, int seed = 0);
// A smooth image (gentle gradients) that survives lossy JPEG coding within a few levels.
Image smooth_image(int h, int w, int c, int seed = 0);
Image constant_image(int h, int w, int c, uint8_t value);
// Uniform pseudo-random bytes, a fixed function of (seed, position): the hardest case for a filter
// (all the energy at high frequencies).
Image noise_image(int h, int w, int c, uint32_t seed = 1);

// Appends v big-endian (PNG chunks, IDX headers).
void put_be32(std::vector<uint8_t>& out, uint32_t v);
// A PNG signature, an IHDR chunk (8-bit RGB) claiming width x height, and IEND: a few dozen bytes
// (a decompression bomb's header without its data).
std::vector<uint8_t> png_header_claiming(uint32_t width, uint32_t height);

// Makes a FIFO (named pipe) at path()/relative and returns its path.
std::string make_fifo(const TempDir& dir, const std::string& relative);
// Runs f and says whether it returned or threw within `seconds`. If it did not, a writer opens the
// FIFO `fifo` so that a reader blocked in open() wakes, and the test goes on (without a hang).
bool returns_without_a_writer(const std::string& fifo, const std::function<void()>& f, double seconds = 5);

// Largest absolute difference between two images of the same size.
int max_abs_diff(const Image& a, const Image& b);

using cnn::testing::error_message;  // the message of the cnn::Error that f throws, or "(no error)"

}  // namespace cnn::data::test
