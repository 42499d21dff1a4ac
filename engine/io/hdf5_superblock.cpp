// The superblock check of hdf5_superblock.h, with standard file I/O only. Field offsets follow the
// HDF5 file format specification, section "Superblock" (all integers little-endian).
#include "engine/io/hdf5_superblock.h"

#include <array>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include "engine/error.h"

namespace cnn::io {

namespace {

constexpr uint64_t kUndefinedAddress = ~uint64_t{0};  // HDF5's "no such structure"
constexpr size_t kSignatureSize = 8;
constexpr size_t kLongestSuperblock = 100;  // version 1 with its root group symbol table entry

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what) {
  throw Error("HDF5 file '" + path.string() + "': " + what);
}

class SuperblockBytes {
 public:
  SuperblockBytes(const std::array<unsigned char, kLongestSuperblock>& bytes, size_t size)
      : bytes_(bytes), size_(size) {}
  bool has(size_t offset, size_t width) const { return offset + width <= size_; }
  uint64_t le(size_t offset, size_t width) const {
    uint64_t value = 0;
    for (size_t i = 0; i < width; ++i) value |= uint64_t{bytes_[offset + i]} << (8 * i);
    return value;
  }

 private:
  const std::array<unsigned char, kLongestSuperblock>& bytes_;
  size_t size_;
};

std::string hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace

void check_foreign_superblock(const std::filesystem::path& path) {
  std::error_code ec;
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  if (ec) fail(path, "cannot read its size: " + ec.message());
  std::ifstream file(path, std::ios::binary);
  std::array<unsigned char, kLongestSuperblock> buffer{};
  file.read(reinterpret_cast<char*>(buffer.data()), buffer.size());
  const SuperblockBytes bytes(buffer, static_cast<size_t>(file.gcount()));
  const auto truncated = [&] { fail(path, "its HDF5 superblock is cut short; the file is truncated"); };
  if (!bytes.has(kSignatureSize, 1)) truncated();

  const uint64_t version = bytes.le(8, 1);
  if (version > 3)
    fail(path, "has HDF5 superblock version " + std::to_string(version) +
                   "; HDF5 1.10 reads versions 0 to 3 (the file is damaged, or from a newer HDF5)");
  // Where the sizes and the addresses lie in each layout.
  const bool old_layout = version <= 1;
  const size_t offsets_at = old_layout ? 13 : 9, lengths_at = old_layout ? 14 : 10;
  const size_t addresses_at = version == 0 ? 24 : version == 1 ? 28 : 12;
  const size_t layout_end = old_layout ? addresses_at + 4 * 8 + 16 : addresses_at + 4 * 8 + 4;
  if (!bytes.has(0, layout_end)) truncated();

  const uint64_t offset_size = bytes.le(offsets_at, 1), length_size = bytes.le(lengths_at, 1);
  if (offset_size != 8 || length_size != 8)
    fail(path, "its HDF5 superblock gives " + std::to_string(offset_size) + "-byte offsets and " +
                   std::to_string(length_size) +
                   "-byte lengths; cnn reads files with 8-byte ones (HDF5's default): the file is damaged, "
                   "or was written with other sizes (save it again with the defaults, e.g. with h5py)");
  const auto address = [&](size_t index) { return bytes.le(addresses_at + 8 * index, 8); };
  const uint64_t base = address(0), end_of_file = address(2);
  if (base != 0)
    fail(path, "its HDF5 superblock gives base address " + hex(base) +
                   " for a superblock at the start of the file; the file is damaged");
  if (end_of_file > file_size)
    fail(path, "its HDF5 superblock says the data end at byte " + std::to_string(end_of_file) + " but the file has " +
                   std::to_string(file_size) + " bytes; the file is truncated");
  const auto inside = [&](uint64_t where, const char* what) {
    if (where != kUndefinedAddress && where >= end_of_file)
      fail(path, std::string("its HDF5 superblock places ") + what + " at " + hex(where) + ", beyond the end of the data (" +
                     hex(end_of_file) + "); the file is damaged");
  };
  if (old_layout) {
    if (address(3) != kUndefinedAddress)
      fail(path, "has an HDF5 driver info block (a file of HDF5's family, multi or split drivers, or damaged); "
                 "cnn reads single-file HDF5 files");
    inside(address(1), "the free-space information");
    const uint64_t root_header = bytes.le(addresses_at + 4 * 8 + 8, 8);  // after the link name offset
    if (root_header == kUndefinedAddress) fail(path, "its HDF5 superblock has no root group; the file is damaged");
    inside(root_header, "the root group");
  } else {
    inside(address(1), "the superblock extension");
    if (address(3) == kUndefinedAddress) fail(path, "its HDF5 superblock has no root group; the file is damaged");
    inside(address(3), "the root group");
  }
}

}  // namespace cnn::io
