// open_dataset: parses a dataset spec and opens the matching dataset type.
#include "data/open_dataset.h"

#include <filesystem>

#include "data/cifar.h"
#include "data/file_dataset.h"
#include "data/idx.h"
#include "data/packed_dataset.h"

namespace cnn::data {

namespace {
// "DIR[:train|test]" -> (DIR, train?)
std::pair<std::string, bool> dir_and_split(const std::string& rest, const std::string& spec) {
  const size_t colon = rest.rfind(':');
  if (colon != std::string::npos) {
    const std::string split = rest.substr(colon + 1);
    if (split == "train" || split == "test") return {rest.substr(0, colon), split == "train"};
  }
  CNN_CHECK(!rest.empty(), "dataset '", spec, "' names no folder");
  return {rest, true};
}
}  // namespace

DatasetPtr open_dataset(const std::string& spec, const LogFn& log) {
  const size_t colon = spec.find(':');
  const std::string kind = colon == std::string::npos ? "" : spec.substr(0, colon);
  const std::string rest = colon == std::string::npos ? spec : spec.substr(colon + 1);
  if (kind == "mnist" || kind == "fashion-mnist") {
    const auto [dir, train] = dir_and_split(rest, spec);
    return open_mnist(dir, train, kind == "fashion-mnist");
  }
  if (kind == "cifar10" || kind == "cifar100") {
    const auto [dir, train] = dir_and_split(rest, spec);
    return open_cifar(dir, kind == "cifar10" ? CifarVariant::cifar10 : CifarVariant::cifar100, train);
  }
  if (kind == "packed") return std::make_shared<PackedDataset>(rest);  // whatever the name, and a folder is refused
  if (kind == "idx") {
    const size_t comma = rest.find(',');
    CNN_CHECK(comma != std::string::npos, "dataset '", spec, "': expected idx:IMAGES,LABELS");
    return open_idx(rest.substr(0, comma), rest.substr(comma + 1));
  }
  std::error_code ec;
  if (std::filesystem::is_directory(spec, ec)) return open_image_folder(spec, log);
  CNN_CHECK(std::filesystem::exists(std::filesystem::symlink_status(spec, ec)), "dataset '", spec,
            "' does not exist; check the path (a folder, a list file or a packed .h5 file)");
  const std::string ext = std::filesystem::path(spec).extension().string();
  if (ext == ".h5" || ext == ".hdf5") return std::make_shared<PackedDataset>(spec);
  if (ext == ".csv" || ext == ".txt" || ext == ".lst") return open_list_file(spec);
  throw Error("cannot tell what dataset '" + spec +
              "' is: give a folder (ImageFolder), a .csv/.txt/.lst list file, a .h5 packed file (or packed:FILE), "
              "mnist:DIR, fashion-mnist:DIR, idx:IMAGES,LABELS, cifar10:DIR or cifar100:DIR (with :train or :test)");
}

}  // namespace cnn::data
