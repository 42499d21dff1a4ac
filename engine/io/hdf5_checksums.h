// The checksum table of the HDF5 files that cnn writes (checkpoints and weights): CRC32C of every
// tensor's raw data and of all the other bytes (HDF5's own structures, the attributes: config,
// step, class names), kept in the file's HDF5 user block, the space before the HDF5 superblock that
// the format reserves for applications (h5py and other HDF5 tools skip it and read the file as usual).
//
// The table is checked before HDF5 parses a byte of the file, so a corrupt file is refused with the
// part that is damaged ("tensor 'model/fc.weight'", "the metadata") instead of loading wrong numbers
// or crashing inside HDF5. It is plain text, readable with `head -c 600 last.h5`:
//
//   cnn checksums 1 crc32c block 4096 size 1234567
//   metadata 1a2b3c4d
//   tensor 0a1b2c3d 4096 36864 model/conv1.weight    (crc, byte offset, byte count, name)
//   ...
//   end 5e6f7a8b                                     (crc of the lines above)
//
// followed by zero bytes up to the block size (a power of two, at least 512, as HDF5 requires).
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace cnn::io {

struct ChecksummedTensor {
  std::string name;     // the dataset's full name ("model/conv1.weight")
  uint64_t offset = 0;  // of its raw data in the file (0 with size 0: an empty tensor)
  uint64_t size = 0;    // bytes
  uint32_t crc = 0;     // crc32c of those bytes
};

struct ChecksumTable {
  uint64_t block_size = 0;  // bytes of the user block; the HDF5 superblock starts here
  uint64_t file_size = 0;
  uint32_t metadata_crc = 0;  // crc32c of every byte after the block that is not a tensor's data
  std::vector<ChecksummedTensor> tensors;
};

// The user block size that holds a table of these tensor names.
uint64_t checksum_block_size(const std::vector<std::string>& tensor_names);

// Writes the table into the user block of the closed HDF5 file at `path` (created with a user block
// of `block_size` bytes), computing the metadata checksum from the file's bytes.
void write_checksum_table(const std::filesystem::path& path, uint64_t block_size,
                          const std::vector<ChecksummedTensor>& tensors);

// The table of the file at `path`, with its own checksum, the file size and the metadata checksum
// verified; nullopt when the file does not start with a checksum table (an HDF5 file written by
// another program or by cnn before checksums, or not an HDF5 file at all). A cnn::Error naming the
// file and what is damaged when the table is there but the file does not match it.
std::optional<ChecksumTable> read_checksum_table(const std::filesystem::path& path);

// Whether the file starts with the HDF5 signature (an HDF5 file without a user block).
bool starts_with_hdf5_signature(const std::filesystem::path& path);

}  // namespace cnn::io
