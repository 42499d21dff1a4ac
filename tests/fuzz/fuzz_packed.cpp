// Feeds PackedDataset (data/packed_dataset.h) packed files whose contents come from the input:
// the storage attribute, labels, class names (or names never written), the images' shape and
// pixels, or the encoded files' bytes and their offsets. The file itself is written by HDF5
// (tests/data/packed_by_hand.h), so it is always well-formed HDF5: mutating raw HDF5 bytes finds,
// within seconds, faults inside Debian's libhdf5 1.10 (reads past its global heap, endless loops)
// that cnn cannot reach into; this harness fuzzes what cnn does with what HDF5 hands it. It opens
// the file and loads the first few samples. A refusal (cnn::Error, CorruptImageError among them) is
// success; an accepted file's labels must name its classes and a loaded image must have the
// requested channels and height x width x channels bytes. Anything else is a finding.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>

#include "data/packed_dataset.h"
#include "fuzz_support.h"
#include "packed_by_hand.h"

namespace {
cnn::data::test::HandPackedFile packed_file(FuzzedDataProvider& in) {
  cnn::data::test::HandPackedFile f;
  f.storage = in.ConsumeBool() ? "encoded" : in.ConsumeBool() ? "pixels" : in.ConsumeRandomLengthString(12);
  f.labels.resize(in.ConsumeIntegralInRange<size_t>(0, 6));
  for (int64_t& label : f.labels) label = in.ConsumeIntegralInRange<int64_t>(-1, 4);
  f.class_names.resize(in.ConsumeIntegralInRange<size_t>(0, 4));
  for (std::string& name : f.class_names) name = in.ConsumeRandomLengthString(8);
  f.class_names_written = in.ConsumeIntegralInRange<int>(0, 15) != 0;
  if (f.storage == "encoded") {
    f.offsets.resize(in.ConsumeIntegralInRange<size_t>(0, 7));
    for (int64_t& offset : f.offsets) offset = in.ConsumeIntegral<int64_t>() % 4096;
    const std::vector<uint8_t> bytes = in.ConsumeRemainingBytes<uint8_t>();
    f.data = cnn::Tensor::empty({static_cast<int64_t>(bytes.size())}, cnn::DType::u8);
    std::copy(bytes.begin(), bytes.end(), f.data.data_as<uint8_t>());
  } else {
    const std::vector<int64_t> shape = {in.ConsumeIntegralInRange<int64_t>(0, 6), in.ConsumeIntegralInRange<int64_t>(0, 9),
                                        in.ConsumeIntegralInRange<int64_t>(0, 9), in.ConsumeIntegralInRange<int64_t>(0, 5)};
    f.data = cnn::Tensor::zeros(cnn::Shape(shape), cnn::DType::u8);
    const std::vector<uint8_t> bytes = in.ConsumeBytes<uint8_t>(f.data.nbytes());
    std::copy(bytes.begin(), bytes.end(), f.data.data_as<uint8_t>());
  }
  return f;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  cnn::data::DecodeOptions options;
  options.channels = in.ConsumeBool() ? 1 : 3;
  options.max_pixels = 1 << 20;  // fast executions; the limit's check is the same at any value
  const std::string path = cnn::fuzz::InputFile::path_of("input.h5");
  cnn::data::test::write_packed_by_hand(path, packed_file(in));
  cnn::fuzz::refused_cleanly_or_accepted([&] {
    const cnn::data::PackedDataset dataset(path);
    for (int64_t i = 0; i < std::min<int64_t>(dataset.size(), 4); ++i) {
      cnn::fuzz::require(dataset.label(i) >= 0 && dataset.label(i) < dataset.num_classes(),
                         "a packed sample's label names a class");
      cnn::fuzz::refused_cleanly_or_accepted([&] {
        const cnn::data::Image image = dataset.load(i, options);
        cnn::fuzz::require(image.channels == options.channels, "a packed image has the requested channels");
        cnn::fuzz::require(image.pixels.size() == static_cast<size_t>(image.height) * image.width * image.channels,
                           "a packed image holds height x width x channels bytes");
      });
    }
  });
  return 0;
}
