// The shared part of the harnesses (fuzz_support.h).
#include "fuzz_support.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace cnn::fuzz {

namespace fs = std::filesystem;

void show_refusal(const Error& refusal) {
  static const bool show = std::getenv("CNN_FUZZ_SHOW_REFUSALS") != nullptr;
  if (show) std::fprintf(stderr, "fuzz: refused: %s\n", refusal.what());
}

void require(bool holds, const char* what) {
  if (holds) return;
  std::fprintf(stderr, "fuzz: property broken: %s\n", what);
  std::abort();
}

void read_every_byte(const Tensor& tensor) {
  require(tensor.device().is_cpu(), "a loaded tensor is on the CPU");
  const auto* bytes = static_cast<const volatile uint8_t*>(tensor.data());
  uint8_t all = 0;
  for (size_t i = 0; i < tensor.nbytes(); ++i) all ^= bytes[i];
  (void)all;
}

namespace {
// /dev/shm keeps millions of rewrites off the disk; elsewhere the system's temp folder.
fs::path make_folder() {
  const fs::path base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
  fs::path folder = base / ("cnn-fuzz-" + std::to_string(::getpid()));
  fs::create_directories(folder);
  return folder;
}

const fs::path& folder() {
  static const fs::path path = [] {
    fs::path made = make_folder();
    std::atexit([] {
      std::error_code ignored;
      fs::remove_all(folder(), ignored);
    });
    return made;
  }();
  return path;
}
}  // namespace

std::string InputFile::path_of(const std::string& name) { return (folder() / name).string(); }

std::string InputFile::write(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = path_of(name);
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  require(out.good(), "the input file could be written");
  return path;
}

}  // namespace cnn::fuzz
