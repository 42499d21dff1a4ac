// Packed datasets written with HDF5 directly, in cnn_pack's layout (data/packed_dataset.h) but with
// small contiguous datasets, and optionally damaged: for the reader's tests and the fuzz seeds
// (tests/fuzz/make_seeds.cpp), which need files that cnn_pack itself would never write.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace cnn::data::test {

struct HandPackedFile {
  std::string storage = "pixels";         // the "storage" attribute: pixels or encoded
  std::vector<int64_t> labels;
  std::vector<std::string> class_names;
  bool class_names_written = true;        // false: the dataset is created, its names never written
  Tensor data;                            // u8: images [N, H, W, C], or the encoded files' bytes [total]
  std::vector<int64_t> offsets;           // encoded: N + 1 offsets into data
  std::string pixel_type = "u8";          // the element type /images is stored as: u8, f32 (data / 255) or i16
  bool float_labels = false;              // /labels stored as float32
};

void write_packed_by_hand(const std::string& path, const HandPackedFile& file);

}  // namespace cnn::data::test
