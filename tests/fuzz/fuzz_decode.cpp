// Feeds the input as an encoded image to cnn::data::decode_image (data/decode.h): the JPEG and PNG
// header inspection (the pixel limit is checked from the header, before any pixel is allocated),
// then TurboJPEG's or stb_image's decoding, DCT-domain downscaling and channel conversion. The
// first byte picks the options (1 or 3 channels; a minimum side for JPEG downscaling); the rest is
// the file. A refusal (cnn::Error, CorruptImageError among them) is success; a decoded image must
// have the requested channels, a size within the pixel limit, and height x width x channels bytes.
// Anything else is a finding. (TurboJPEG and stb_image are Debian's libraries, not instrumented.)
#include "data/decode.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  cnn::data::DecodeOptions options;
  options.channels = data[0] & 1 ? 1 : 3;
  options.min_side = (data[0] >> 1) * 4;  // 0 (full size) to 508
  options.max_pixels = 1 << 20;  // fast executions; the limit's check is the same at any value
  cnn::fuzz::refused_cleanly_or_accepted([&] {
    const cnn::data::Image image = cnn::data::decode_image(data + 1, size - 1, options, "fuzz input");
    cnn::fuzz::require(image.channels == options.channels, "a decoded image has the requested channels");
    cnn::fuzz::require(static_cast<int64_t>(image.height) * image.width <= options.max_pixels,
                       "a decoded image is within the pixel limit");
    cnn::fuzz::require(image.pixels.size() == static_cast<size_t>(image.height) * image.width * image.channels,
                       "a decoded image holds height x width x channels bytes");
  });
  return 0;
}
