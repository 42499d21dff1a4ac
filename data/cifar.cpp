// CIFAR binary files: records are read whole and their planar images transposed to HWC.
#include "data/cifar.h"

#include <filesystem>
#include <fstream>

namespace cnn::data {

namespace {
constexpr int kSide = 32, kPlane = kSide * kSide, kImageBytes = 3 * kPlane;

std::vector<std::string> read_names(const std::string& path) {
  std::vector<std::string> names;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return names;  // optional: the default names then
  require_regular_file(path, "CIFAR class-name file");
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) names.push_back(line);
  }
  return names;
}
}  // namespace

std::shared_ptr<ArrayDataset> open_cifar_files(const std::vector<std::string>& files, CifarVariant variant,
                                               std::vector<std::string> class_names) {
  CNN_CHECK(!files.empty(), "open_cifar_files: no files given");
  const int label_bytes = variant == CifarVariant::cifar10 ? 1 : 2;
  const int64_t classes = variant == CifarVariant::cifar10 ? 10 : 100;
  const int64_t record = label_bytes + kImageBytes;
  std::vector<std::vector<uint8_t>> contents;
  int64_t total = 0;
  for (const std::string& file : files) {
    contents.push_back(read_file_bytes(file));
    const auto size = static_cast<int64_t>(contents.back().size());
    CNN_CHECK(size > 0 && size % record == 0, "CIFAR file ", file, " has ", size, " bytes, not a whole number of ",
              record, "-byte records; it is truncated or not a ",
              variant == CifarVariant::cifar10 ? "CIFAR-10" : "CIFAR-100", " binary file");
    total += size / record;
  }
  Tensor images = Tensor::empty({total, kSide, kSide, 3}, DType::u8);
  std::vector<int64_t> labels;
  labels.reserve(static_cast<size_t>(total));
  uint8_t* out = images.data_as<uint8_t>();
  for (size_t f = 0; f < files.size(); ++f) {
    const std::vector<uint8_t>& bytes = contents[f];
    for (size_t r = 0; r < bytes.size() / record; ++r) {
      const uint8_t* rec = bytes.data() + r * record;
      const int64_t label = rec[label_bytes - 1];
      CNN_CHECK(label < classes, "CIFAR file ", files[f], ", record ", r, ": label ", label, " is outside [0, ",
                classes, "); is this the right variant (CIFAR-10 vs CIFAR-100)?");
      labels.push_back(label);
      const uint8_t* planes = rec + label_bytes;
      for (int p = 0; p < kPlane; ++p)
        for (int c = 0; c < 3; ++c) *out++ = planes[c * kPlane + p];
    }
  }
  if (class_names.empty()) class_names = numbered_class_names(classes);
  std::string name = files.front() + (files.size() > 1 ? " (+" + std::to_string(files.size() - 1) + " files)" : "");
  return std::make_shared<ArrayDataset>(images, std::move(labels), std::move(class_names), std::move(name));
}

std::shared_ptr<ArrayDataset> open_cifar(const std::string& dir, CifarVariant variant, bool train) {
  std::vector<std::string> files;
  std::vector<std::string> names;
  if (variant == CifarVariant::cifar10) {
    if (train)
      for (int i = 1; i <= 5; ++i) files.push_back(dir + "/data_batch_" + std::to_string(i) + ".bin");
    else
      files.push_back(dir + "/test_batch.bin");
    names = read_names(dir + "/batches.meta.txt");
    if (names.empty())
      names = {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};
  } else {
    files.push_back(dir + (train ? "/train.bin" : "/test.bin"));
    names = read_names(dir + "/fine_label_names.txt");
  }
  for (const std::string& f : files)
    CNN_CHECK(std::filesystem::exists(f), "CIFAR file ", f, " is missing; point to the folder of the binary version");
  return open_cifar_files(files, variant, std::move(names));
}

}  // namespace cnn::data
