// Packed datasets: one HDF5 file made by cnn_pack, read directly by the loader. Layout:
//   /labels       i64 [N]
//   /class_names  variable-length strings [K]
//   /images       u8 [N, H, W, C], one image per chunk (random access)   ("pixels" files), or
//   /encoded      u8 [total bytes], 1 MiB chunks, with /offsets i64 [N + 1]   ("encoded" files)
//   attributes on the root group: format = "cnn-pack-1", storage = "pixels" | "encoded".
// Pixel files hold images already resized (shorter side to `size`, then the centred size x size
// window) so the loader only crops, flips and normalises; encoded files keep the original bytes.
// The Debian HDF5 library is built thread-safe: concurrent reads from loader threads are
// serialised inside it (decoding of encoded files runs outside, in parallel).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"

namespace cnn::data {

class PackedDataset : public Dataset {
 public:
  explicit PackedDataset(const std::string& path);
  ~PackedDataset() override;

  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  int64_t label(int64_t index) const override { return labels_[static_cast<size_t>(index)]; }
  Image load(int64_t index, const DecodeOptions& options) const override;
  std::string source(int64_t index) const override { return path_ + " [" + std::to_string(index) + "]"; }

  bool encoded() const { return encoded_; }
  // Pixel files: the stored image size (height, width, channels).
  int height() const { return shape_[0]; }
  int width() const { return shape_[1]; }
  int channels() const { return shape_[2]; }

 private:
  std::string path_;
  int64_t file_ = -1, data_ = -1;  // hid_t of the file and of /images or /encoded
  bool encoded_ = false;
  int shape_[3] = {0, 0, 0};
  std::vector<int64_t> labels_, offsets_;
};

struct PackOptions {
  int size = 0;          // pixel files: side of the stored square images; 0 keeps the native size
  bool encoded = false;  // keep the original file bytes (image files only) instead of pixels
  int channels = 3;
  int workers = 4;
  // Images whose header claims more pixels are skipped as corrupt before they are decoded, as in
  // the loader (DecodeOptions::max_pixels); 0: no limit.
  int64_t max_image_pixels = kDefaultMaxImagePixels;
  std::function<void(const std::string&)> log;  // progress and warnings; default standard error
  // Asked between samples: true ends the packing with a cnn::Error, the temporary file removed
  // (cnn_pack: a Ctrl-C or SIGTERM). Unset: never.
  std::function<bool()> stop_requested;
};

struct PackReport {
  int64_t written = 0;
  std::vector<std::string> skipped;  // sources of corrupt samples left out
};

// Writes `dataset` to `out_path` (through a temporary file renamed at the end). Corrupt samples are
// skipped and reported.
PackReport pack_dataset(const Dataset& dataset, const std::string& out_path, const PackOptions& options);

// Decodes every sample with `workers` threads and returns (source, reason) for each unreadable one,
// in dataset order (an image over max_image_pixels among them, as pack_dataset skips it). Writes nothing.
std::vector<std::pair<std::string, std::string>> check_dataset(const Dataset& dataset, int workers,
                                                               int64_t max_image_pixels = kDefaultMaxImagePixels);

}  // namespace cnn::data
