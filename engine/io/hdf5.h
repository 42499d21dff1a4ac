// Named tensors and metadata in HDF5 files: checkpoints, weights, and anything that h5py or other
// HDF5 tools should be able to read.
//
// Layout: one dataset per tensor, named by the tensor's name ("layer1.0.conv1.weight"), in the root
// group (a name with '/' creates groups), with the tensor's shape and a little-endian type of its
// dtype: IEEE float32/float64, int32/int64, uint8, and for f16 and bf16 16-bit HDF5 float types (f16
// is IEEE binary16, which h5py reads as numpy float16; bf16 has an 8-bit exponent and 7-bit
// mantissa, which HDF5 converts to float32 for tools that know no bfloat16). Those two datasets also
// carry a string attribute "dtype" ("f16" or "bf16"). Metadata are attributes of the root group:
// signed and unsigned 64-bit integers (epoch, step, RNG state), doubles, UTF-8 strings (config
// text), and lists of strings (class names). Datasets and attributes keep their creation order.
//
// Every file written carries CRC32C checksums of each tensor and of the metadata in its HDF5 user block
// (engine/io/hdf5_checksums.h); loading verifies them and names the damaged part. Files without
// them (from h5py, or older ones) load unverified.
//
// Writes are atomic (engine/io/atomic_file.h): a failed or interrupted save leaves the previous
// file as it was. Every failure is a cnn::Error naming the file, the dataset or attribute, and what
// HDF5 reported.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "engine/io/named_tensors.h"

namespace cnn::io {

using Attribute = std::variant<int64_t, uint64_t, double, std::string, std::vector<std::string>>;

struct TensorFile {
  NamedTensors tensors;                         // in file order
  std::map<std::string, Attribute> attributes;  // root-group metadata
  std::string source = "a tensor file";         // the path it was loaded from, for error messages
  bool checksummed = false;  // loaded: every byte was verified against the file's checksum table

  const Tensor& tensor(const std::string& name) const { return find_tensor(tensors, name, source); }
  bool has(const std::string& attribute) const { return attributes.count(attribute) != 0; }
  // Typed attribute access: a cnn::Error naming the file and the key when it is missing or of
  // another kind.
  int64_t integer(const std::string& key) const;
  uint64_t unsigned_integer(const std::string& key) const;
  double real(const std::string& key) const;
  const std::string& text(const std::string& key) const;
  const std::vector<std::string>& texts(const std::string& key) const;
};

// Called after each dataset is written, with its name (a hook for progress reporting, and for tests
// that interrupt a save half way by throwing from it).
using AfterTensorWritten = std::function<void(const std::string& name)>;

// Writes `file` to `path` (tensors on any device; they are copied to the host to be written).
void save_hdf5(const std::filesystem::path& path, const TensorFile& file, const AfterTensorWritten& after_each = {});
// Reads every dataset (into CPU tensors) and every root attribute of `path`. Integer datasets of
// other widths are widened to i32/i64; numeric attributes holding more than one value are skipped.
TensorFile load_hdf5(const std::filesystem::path& path);

}  // namespace cnn::io
