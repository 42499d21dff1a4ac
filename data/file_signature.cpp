// File signatures (see file_signature.h): a short table of the formats a dataset path is likely
// to hold by mistake, each recognised from its first bytes.
#include "data/file_signature.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "data/dataset.h"

namespace cnn::data {

namespace {
struct Signature {
  const char* bytes;
  size_t size;
  const char* what;
};
constexpr Signature kSignatures[] = {
    {"\x89HDF\r\n\x1a\n", 8, "an HDF5 file"},  {"\x89PNG\r\n\x1a\n", 8, "a PNG image"}, {"\xff\xd8\xff", 3, "a JPEG image"},
    {"GIF8", 4, "a GIF image"},                {"BM", 2, "a BMP image"},                {"\x1f\x8b", 2, "a gzip file"},
    {"PK\x03\x04", 4, "a zip file"},
};

std::string kind_of(const uint8_t* bytes, size_t size) {
  for (const Signature& s : kSignatures)
    if (size >= s.size && std::memcmp(bytes, s.bytes, s.size) == 0) return s.what;
  // IDX: two zero bytes, the element type (0x08 unsigned byte ... 0x0E double), the rank.
  if (size >= 4 && bytes[0] == 0 && bytes[1] == 0 && bytes[2] >= 0x08 && bytes[2] <= 0x0E && bytes[3] >= 1)
    return "an IDX file";
  const bool text = std::all_of(bytes, bytes + size, [](uint8_t b) { return b == '\n' || b == '\r' || b == '\t' || (b >= 0x20 && b < 0x7f); });
  return text ? "text" : "";
}
}  // namespace

std::string describe_signature(const uint8_t* bytes, size_t size) {
  if (size == 0) return "an empty file";
  char magic[16];
  std::string text = "magic 0x";
  for (size_t i = 0; i < std::min<size_t>(size, 4); ++i) {
    std::snprintf(magic, sizeof magic, "%02x", bytes[i]);
    text += magic;
  }
  const std::string kind = kind_of(bytes, std::min<size_t>(size, 16));
  return kind.empty() ? text : text + ", " + kind;
}

std::string describe_file_start(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) return file_kind(info.st_mode);  // never open a FIFO
  std::ifstream in(path, std::ios::binary);
  if (!in) return "unreadable";
  std::vector<uint8_t> bytes(16);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return describe_signature(bytes.data(), static_cast<size_t>(in.gcount()));
}

}  // namespace cnn::data
