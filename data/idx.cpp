// IDX files read into u8 tensors, and IDX image/label pairs as datasets (see idx.h).
#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <vector>

#include "data/file_signature.h"

namespace cnn::data {

namespace {
// Reads exactly `bytes` bytes or explains why not.
void read_exact(gzFile file, void* dst, size_t bytes, const std::string& path, const char* what) {
  size_t done = 0;
  while (done < bytes) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(bytes - done, 1u << 30));
    const int got = gzread(file, static_cast<char*>(dst) + done, chunk);
    if (got <= 0) {
      int code = 0;
      const char* message = gzerror(file, &code);
      throw Error("IDX file " + path + ": truncated while reading the " + what + " (got " + std::to_string(done) +
                  " of " + std::to_string(bytes) + " bytes" + (code < 0 ? std::string(", ") + message : "") +
                  "); download it again");
    }
    done += static_cast<size_t>(got);
  }
}
// Refuses a header that claims more data than the file can hold before that much memory is
// allocated: a few bytes can claim gigabytes. A raw file must hold the claimed bytes after its
// header; a gzip stream cannot inflate beyond deflate's maximum ratio of 1032:1 (zlib's FAQ).
void check_file_can_hold(gzFile file, const std::string& path, int64_t data_bytes, int64_t header_bytes) {
  std::error_code error;
  const auto file_bytes = static_cast<int64_t>(std::filesystem::file_size(path, error));
  if (error) return;  // not a regular file (a pipe): the reads that follow find any shortfall
  constexpr int64_t kMaxDeflateRatio = 1032;
  const bool raw = gzdirect(file) == 1;
  const int64_t most = raw ? file_bytes - header_bytes : file_bytes * kMaxDeflateRatio;
  CNN_CHECK(data_bytes <= most, "IDX file ", path, ": its header claims ", data_bytes, " bytes of data, more than ",
            raw ? "the file's " + std::to_string(file_bytes) + " bytes hold after the header"
                : "its " + std::to_string(file_bytes) + " compressed bytes can inflate to",
            "; the file is truncated or corrupt; download it again");
}

}  // namespace

Tensor read_idx(const std::string& path) {
  require_regular_file(path, "IDX file");
  gzFile file = gzopen(path.c_str(), "rb");  // also reads uncompressed files transparently
  CNN_CHECK(file != nullptr, "cannot open IDX file ", path, ": ", std::strerror(errno));
  struct Closer {
    gzFile f;
    ~Closer() { gzclose(f); }
  } closer{file};

  unsigned char magic[4];
  read_exact(file, magic, 4, path, "header");
  if (magic[0] != 0 || magic[1] != 0) {
    // What the (decompressed) file starts with instead: a few more bytes tell an HDF5 file or a PNG.
    uint8_t start[16];
    std::memcpy(start, magic, 4);
    const int more = gzread(file, start + 4, sizeof start - 4);
    throw Error("IDX file " + path + " starts with " + describe_signature(start, 4 + static_cast<size_t>(std::max(more, 0))) +
                ", not an IDX magic number (two zero bytes, the element type 0x08 for unsigned bytes, then the number "
                "of dimensions: 0x00000803 for MNIST images, 0x00000801 for labels); point at the MNIST-format files "
                "(train-images-idx3-ubyte[.gz], ...), or download them again if this one is damaged");
  }
  CNN_CHECK(magic[2] == 0x08, "IDX file ", path, " holds element type 0x", std::hex, int(magic[2]),
            "; only unsigned bytes (0x08) are supported");
  const int rank = magic[3];
  CNN_CHECK(rank >= 1 && rank <= Shape::kMaxDims, "IDX file ", path, " has rank ", rank, "; expected 1 to ",
            Shape::kMaxDims);
  std::vector<int64_t> dims;
  for (int i = 0; i < rank; ++i) {
    unsigned char b[4];
    read_exact(file, b, 4, path, "dimensions");
    dims.push_back((int64_t(b[0]) << 24) | (int64_t(b[1]) << 16) | (int64_t(b[2]) << 8) | int64_t(b[3]));
  }
  // A zero size holds nothing to train on, and later divisions by the image's sides would trap.
  CNN_CHECK(std::all_of(dims.begin(), dims.end(), [](int64_t d) { return d > 0; }), "IDX file ", path,
            ": its header gives the sizes ", Shape(dims).str(), ", one of them zero; the file holds no data or is "
            "damaged: download it again");
  const std::optional<int64_t> count = element_count(dims);
  CNN_CHECK(count.has_value(), "IDX file ", path, ": its header's sizes multiply beyond 2^60 bytes; the file is corrupt");
  check_file_can_hold(file, path, *count, 4 + 4 * static_cast<int64_t>(rank));
  Tensor t = Tensor::empty(Shape(dims), DType::u8);
  read_exact(file, t.data(), t.nbytes(), path, "data");
  return t;
}

std::shared_ptr<ArrayDataset> open_idx(const std::string& images_path, const std::string& labels_path,
                                       std::vector<std::string> class_names) {
  Tensor images = read_idx(images_path);
  const Tensor labels = read_idx(labels_path);
  CNN_CHECK(images.dim() == 3 || images.dim() == 4, "IDX file ", images_path, " holds ", images.shape().str(),
            "; expected images [N, H, W]");
  CNN_CHECK(labels.dim() == 1, "IDX file ", labels_path, " holds ", labels.shape().str(), "; expected labels [N]");
  if (images.dim() == 3) images = images.reshape({images.size(0), images.size(1), images.size(2), 1});
  const uint8_t* y = labels.data_as<uint8_t>();
  std::vector<int64_t> label_values(y, y + labels.numel());
  if (class_names.empty()) {
    const int64_t top = label_values.empty() ? 0 : *std::max_element(label_values.begin(), label_values.end());
    class_names = numbered_class_names(top + 1);
  }
  return std::make_shared<ArrayDataset>(images, std::move(label_values), std::move(class_names),
                                        images_path + " + " + labels_path);
}

std::shared_ptr<ArrayDataset> open_mnist(const std::string& dir, bool train, bool fashion) {
  const std::string prefix = train ? "train" : "t10k";
  auto find = [&](const std::string& stem) {
    const std::string raw = dir + "/" + prefix + stem;
    if (std::filesystem::exists(raw)) return raw;
    const std::string gz = raw + ".gz";
    CNN_CHECK(std::filesystem::exists(gz), "no ", prefix, stem, "[.gz] in ", dir,
              "; point to a folder with the MNIST or Fashion-MNIST IDX files");
    return gz;
  };
  std::vector<std::string> names;
  if (fashion)
    names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
  else
    names = numbered_class_names(10);
  return open_idx(find("-images-idx3-ubyte"), find("-labels-idx1-ubyte"), std::move(names));
}

}  // namespace cnn::data
