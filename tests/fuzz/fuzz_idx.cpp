// Feeds the input as an IDX file (MNIST's format, raw or gzip-compressed) to cnn::data::read_idx
// (data/idx.h). A refusal (cnn::Error) is success; an accepted file's tensor must be u8 with
// storage for all of its elements. Anything else is a finding, including an
// allocation beyond -malloc_limit_mb for a few bytes that claim a huge tensor.
#include "data/idx.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = cnn::fuzz::InputFile::write("input.idx", data, size);
  cnn::fuzz::refused_cleanly_or_accepted([&] {
    const cnn::Tensor t = cnn::data::read_idx(path);
    cnn::fuzz::require(t.dtype() == cnn::DType::u8, "an IDX tensor holds bytes");
    cnn::fuzz::read_every_byte(t);
  });
  return 0;
}
