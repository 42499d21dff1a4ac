// The safetensors format (weights exchanged with PyTorch/Hugging Face tools): an 8-byte
// little-endian header length N, N bytes of JSON mapping each tensor name to
// {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]} (plus an optional "__metadata__"
// object of strings), then the raw little-endian data, offsets relative to its start.
// Dtypes: F32, F64, F16, BF16, I32, I64, U8. Files cnn writes carry a "cnn.crc32c" metadata entry
// with a CRC32C of each tensor (its dtype, shape and data) and of the other metadata; loading
// verifies it and names a damaged tensor. Files without it load unverified. Writes are atomic (engine/io/atomic_file.h); a file that
// is missing, truncated or has a bad header is a cnn::Error naming the file and the problem.
#pragma once
#include <filesystem>
#include <map>
#include <string>

#include "engine/io/named_tensors.h"

namespace cnn::io {

struct SafetensorsFile {
  NamedTensors tensors;  // in the order of their data in the file
  std::map<std::string, std::string> metadata;
  std::string source = "a safetensors file";
  bool checksummed = false;  // loaded: every tensor and the metadata matched the file's checksums

  const Tensor& tensor(const std::string& name) const { return find_tensor(tensors, name, source); }
};

// Writes the tensors (any device; copied to the host) in the given order, back to back after a
// header padded with spaces so that the data starts 8-byte aligned (as the reference writer does).
void save_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});
// Reads every tensor into CPU memory.
SafetensorsFile load_safetensors(const std::filesystem::path& path);

}  // namespace cnn::io
