// Image encoding: TurboJPEG (4:2:0 for colour, a thread-local compressor handle) and stb_image_write.
#include "data/encode.h"

#include <stb/stb_image_write.h>
#include <turbojpeg.h>

#include <memory>

#include "engine/error.h"

namespace cnn::data {

namespace {
struct TjDeleter {
  void operator()(void* handle) const { tjDestroy(handle); }
};

std::vector<uint8_t> encode_jpeg(const Image& image, int quality, bool cmyk) {
  thread_local std::unique_ptr<void, TjDeleter> handle(tjInitCompress());
  CNN_CHECK(handle != nullptr, "TurboJPEG could not create a compressor: ", tjGetErrorStr2(nullptr));
  int format = -1, subsampling = TJSAMP_420;
  if (image.channels == 1) format = TJPF_GRAY, subsampling = TJSAMP_GRAY;
  else if (image.channels == 3) format = TJPF_RGB;
  else if (image.channels == 4 && cmyk) format = TJPF_CMYK;
  CNN_CHECK(format >= 0, "JPEG encoding takes 1, 3 or (CMYK) 4 channels, not ", image.channels);
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  const int rc = tjCompress2(handle.get(), image.pixels.data(), image.width, 0, image.height, format, &jpeg, &size,
                             subsampling, quality, 0);
  std::unique_ptr<unsigned char, void (*)(unsigned char*)> owned(jpeg, tjFree);
  CNN_CHECK(rc == 0, "JPEG encoding of a ", image.size_str(), " image failed: ", tjGetErrorStr2(handle.get()));
  return std::vector<uint8_t>(jpeg, jpeg + size);
}

void append_bytes(void* context, void* data, int size) {
  auto* out = static_cast<std::vector<uint8_t>*>(context);
  const auto* bytes = static_cast<const uint8_t*>(data);
  out->insert(out->end(), bytes, bytes + size);
}
}  // namespace

std::vector<uint8_t> encode_image(const Image& image, ImageFormat format, int quality, bool cmyk_jpeg) {
  CNN_CHECK(!image.empty(), "cannot encode an empty image");
  if (format == ImageFormat::jpeg) return encode_jpeg(image, quality, cmyk_jpeg);
  std::vector<uint8_t> out;
  int ok = 0;
  switch (format) {
    case ImageFormat::png:
      ok = stbi_write_png_to_func(append_bytes, &out, image.width, image.height, image.channels, image.pixels.data(),
                                  image.width * image.channels);
      break;
    case ImageFormat::bmp:
      ok = stbi_write_bmp_to_func(append_bytes, &out, image.width, image.height, image.channels, image.pixels.data());
      break;
    case ImageFormat::tga:
      ok = stbi_write_tga_to_func(append_bytes, &out, image.width, image.height, image.channels, image.pixels.data());
      break;
    case ImageFormat::jpeg: break;
  }
  CNN_CHECK(ok != 0, "encoding a ", image.size_str(), " image failed");
  return out;
}

}  // namespace cnn::data
