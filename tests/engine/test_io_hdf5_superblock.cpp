// The superblock check of HDF5 files cnn did not write (engine/io/hdf5_superblock.h): files from
// h5py-like writers load in both superblock layouts, and each implausible field is refused by name
// before the HDF5 library reads the file (the fuzzing reproducer among them).
#include <doctest/doctest.h>

#include <fstream>

#include "engine/io/hdf5.h"
#include "error_message.h"
#include "foreign_hdf5.h"
#include "test_io_support.h"

using namespace cnn;
using namespace cnn::io;
using cnn::testing::error_message;
using io_test::ScratchDir;

namespace {

// Overwrites `width` bytes at `offset` with the little-endian `value`.
void patch(const std::filesystem::path& path, size_t offset, uint64_t value, size_t width) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(offset));
  for (size_t i = 0; i < width; ++i) f.put(static_cast<char>((value >> (8 * i)) & 0xff));
}

// The load is refused with a message that names the file and contains `words`.
void check_refused(const std::filesystem::path& path, const std::string& words) {
  CHECK_THROWS_WITH_AS(load_hdf5(path), doctest::Contains(words.c_str()), Error);
  CHECK(error_message([&] { load_hdf5(path); }).find(path.string()) != std::string::npos);
}

}  // namespace

TEST_CASE("HDF5 files from other writers load with either superblock layout") {
  ScratchDir dir("superblock_layouts");
  for (const bool latest : {false, true}) {
    const std::filesystem::path path = dir / (latest ? "v3.h5" : "v0.h5");
    io_test::write_foreign_hdf5(path, latest);
    CHECK(static_cast<int>(io_test::read_file(path)[8]) == (latest ? 3 : 0));  // the superblock version
    CHECK(load_hdf5(path).tensor("fc.bias").to_doubles() == std::vector<double>{1.0, 2.0, 3.0});
  }
}

TEST_CASE("an implausible superblock field is refused by name before HDF5 opens the file") {
  ScratchDir dir("superblock_fields");
  const std::filesystem::path path = dir / "foreign.h5";
  const auto fresh = [&](bool latest = false) { io_test::write_foreign_hdf5(path, latest); };
  const uint64_t size = [&] { fresh(); return std::filesystem::file_size(path); }();
  // Version 0 layout: sizes at 13 and 14; base, free space, end of file, driver info at 24, 32, 40, 48;
  // the root group's object header address at 64.
  fresh(), patch(path, 14, 4, 1);
  check_refused(path, "8-byte offsets and 4-byte lengths");
  fresh(), patch(path, 24, 512, 8);
  check_refused(path, "base address 0x200");
  fresh(), patch(path, 40, size + 1, 8);
  check_refused(path, "the file is truncated");
  fresh(), patch(path, 48, 0x11, 8);
  check_refused(path, "driver info block");
  fresh(), patch(path, 64, size, 8);
  check_refused(path, "places the root group at");
  fresh(), patch(path, 8, 7, 1);
  check_refused(path, "superblock version 7");
  // Version 3 layout: end of file at 28, the root group's object header at 36.
  fresh(true), patch(path, 28, size * 4, 8);
  check_refused(path, "the file is truncated");
  fresh(true), patch(path, 36, ~uint64_t{0}, 8);
  check_refused(path, "has no root group");
  // Cut inside the superblock.
  fresh(), std::filesystem::resize_file(path, 50);
  check_refused(path, "cut short");
}

TEST_CASE("fuzzing reproducer: a superblock that made HDF5 allocate 4 GiB is refused") {
  // Found by fuzz_hdf5: out of memory inside H5Fopen (H5F__super_read -> H5C_protect ->
  // H5MM_realloc(4294967268)) for a superblock with 4-byte lengths, undefined base and end-of-file
  // addresses and a driver info block; before the superblock check it reached the library.
  const std::filesystem::path path = std::filesystem::path(CNN_FUZZ_CORPUS) / "fuzz_hdf5" / "crash-superblock-4gib";
  REQUIRE(std::filesystem::is_regular_file(path));
  check_refused(path, "4-byte lengths");
}
