// Feeds the input as a CSV list file ("path,label" lines) to cnn::data::open_list_file
// (data/file_dataset.h). The first byte picks the options (header: detected, yes or no; class names
// given or not) and the rest is the file, written beside two image files it may name (a.png and
// sub/b.jpg). A refusal (cnn::Error) is success; an accepted list must name at least one sample,
// each with a label below its class count. Anything else is a finding.
#include <optional>

#include "data/file_dataset.h"
#include "fuzz_support.h"

namespace {
// The files a list may name, written once.
void write_listed_files() {
  static const bool written = [] {
    const uint8_t png_signature[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    cnn::fuzz::InputFile::write("a.png", png_signature, sizeof png_signature);
    cnn::fuzz::InputFile::write("sub/b.jpg", png_signature, 0);
    return true;
  }();
  (void)written;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  write_listed_files();
  cnn::data::ListFileOptions options;
  const int header = data[0] & 3;  // 0: detected, 1: a header line, 2 or 3: none
  if (header > 0) options.header = header == 1;
  if (data[0] & 4) options.class_names = {"cat", "dog", "7"};
  const std::string path = cnn::fuzz::InputFile::write("list.csv", data + 1, size - 1);
  cnn::fuzz::refused_cleanly_or_accepted([&] {
    const auto dataset = cnn::data::open_list_file(path, options);
    cnn::fuzz::require(dataset->size() > 0, "an accepted list names at least one sample");
    for (int64_t i = 0; i < dataset->size(); ++i)
      cnn::fuzz::require(dataset->label(i) >= 0 && dataset->label(i) < dataset->num_classes(),
                         "a listed sample's label names a class");
  });
  return 0;
}
