// Feeds the input as a CIFAR binary batch to cnn::data::open_cifar_files (data/cifar.h): as
// CIFAR-10 when the first byte is even, CIFAR-100 when odd (the byte stays part of the file, so the
// same records are tried both ways). A refusal (cnn::Error) is success; an accepted file's samples
// must be 32x32x3 images with labels below the class count. Anything else is a finding.
#include "data/cifar.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto variant = data[0] % 2 == 0 ? cnn::data::CifarVariant::cifar10 : cnn::data::CifarVariant::cifar100;
  const std::string path = cnn::fuzz::InputFile::write("data_batch.bin", data, size);
  cnn::fuzz::refused_cleanly_or_accepted([&] {
    const auto dataset = cnn::data::open_cifar_files({path}, variant);
    const auto classes = static_cast<int64_t>(dataset->class_names().size());
    for (int64_t i = 0; i < dataset->size(); ++i) {
      cnn::fuzz::require(dataset->label(i) >= 0 && dataset->label(i) < classes, "a CIFAR label names a class");
      const cnn::data::Image image = dataset->load(i, {});
      cnn::fuzz::require(image.height == 32 && image.width == 32 && image.channels == 3, "a CIFAR image is 32x32x3");
    }
  });
  return 0;
}
