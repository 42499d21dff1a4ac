// Test fixtures for data/ (see fixtures.h).
#include "fixtures.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <future>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "engine/error.h"

namespace cnn::data::test {

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  path_ = std::filesystem::temp_directory_path() /
          ("cnn_data_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::write(const std::string& relative, const std::vector<uint8_t>& bytes) const {
  const std::filesystem::path file = path_ / relative;
  std::filesystem::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return file.string();
}

std::string make_fifo(const TempDir& dir, const std::string& relative) {
  const std::filesystem::path p = dir.path() / relative;
  std::filesystem::create_directories(p.parent_path());
  CNN_CHECK(::mkfifo(p.c_str(), 0600) == 0, "mkfifo ", p.string(), " failed");
  return p.string();
}

bool returns_without_a_writer(const std::string& fifo, const std::function<void()>& f, double seconds) {
  std::promise<void> finished;
  std::future<void> done = finished.get_future();
  std::thread worker([&] {
    try {
      f();
    } catch (...) {
    }
    finished.set_value();
  });
  const bool in_time = done.wait_for(std::chrono::duration<double>(seconds)) == std::future_status::ready;
  if (!in_time) {  // wake a reader stuck in open(): a writer appears and leaves at once
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  }
  worker.join();
  return in_time;
}

std::string TempDir::write_text(const std::string& relative, const std::string& text) const {
  return write(relative, std::vector<uint8_t>(text.begin(), text.end()));
}

Image pattern_image(int h, int w, int c, int seed) {
  Image image(h, w, c);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int ch = 0; ch < c; ++ch) image.at(y, x, ch) = static_cast<uint8_t>((seed + 7 * y + 13 * x + 50 * ch) % 256);
  return image;
}

Image smooth_image(int h, int w, int c, int seed) {
  Image image(h, w, c);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int ch = 0; ch < c; ++ch)
        image.at(y, x, ch) = static_cast<uint8_t>(
            128 + 60 * std::sin(0.05 * (x + seed) + ch) + 50 * std::cos(0.04 * (y + 2 * seed) + 2 * ch));
  return image;
}

Image constant_image(int h, int w, int c, uint8_t value) {
  Image image(h, w, c);
  std::fill(image.pixels.begin(), image.pixels.end(), value);
  return image;
}

Image noise_image(int h, int w, int c, uint32_t seed) {
  Image image(h, w, c);
  uint32_t state = seed * 2654435761u + 1;
  for (uint8_t& v : image.pixels) {  // xorshift32
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    v = static_cast<uint8_t>(state >> 24);
  }
  return image;
}

void put_be32(std::vector<uint8_t>& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

std::vector<uint8_t> png_header_claiming(uint32_t width, uint32_t height) {
  std::vector<uint8_t> out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  auto chunk = [&](const char* type, const std::vector<uint8_t>& data) {
    put_be32(out, static_cast<uint32_t>(data.size()));
    std::vector<uint8_t> body(type, type + 4);
    body.insert(body.end(), data.begin(), data.end());
    out.insert(out.end(), body.begin(), body.end());
    put_be32(out, static_cast<uint32_t>(crc32(0, body.data(), static_cast<uInt>(body.size()))));
  };
  std::vector<uint8_t> ihdr;
  put_be32(ihdr, width);
  put_be32(ihdr, height);
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});  // bit depth, colour type RGB, compression, filter, interlace
  chunk("IHDR", ihdr);
  chunk("IEND", {});
  return out;
}

int max_abs_diff(const Image& a, const Image& b) {
  if (a.height != b.height || a.width != b.width || a.channels != b.channels) return 1 << 20;
  int worst = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) worst = std::max(worst, std::abs(int(a.pixels[i]) - int(b.pixels[i])));
  return worst;
}

}  // namespace cnn::data::test
