// Image decoding: TurboJPEG for JPEG (thread-local decompressor handles, DCT-domain downscaling
// when a smaller image suffices), stb_image for the other formats, then channel conversion. The
// pixel limit is checked on the size the header claims, before anything is allocated.
#include "data/decode.h"

#include <stb/stb_image.h>
#include <turbojpeg.h>

#include <cstring>
#include <memory>
#include <string>
#include <string_view>

namespace cnn::data {

namespace {

struct TjDeleter {
  void operator()(void* handle) const { tjDestroy(handle); }
};

// One decompressor per thread: TurboJPEG handles must not be shared between threads.
tjhandle decompressor() {
  thread_local std::unique_ptr<void, TjDeleter> handle(tjInitDecompress());
  CNN_CHECK(handle != nullptr, "TurboJPEG could not create a decompressor: ", tjGetErrorStr2(nullptr));
  return handle.get();
}

// The smallest scaling factor <= 1 whose shorter scaled side is >= min_side.
tjscalingfactor choose_scale(int width, int height, int min_side) {
  tjscalingfactor best{1, 1};
  if (min_side <= 0) return best;
  int count = 0;
  const tjscalingfactor* factors = tjGetScalingFactors(&count);
  for (int i = 0; i < count; ++i) {
    const tjscalingfactor f = factors[i];
    if (f.num > f.denom) continue;
    const int w = TJSCALED(width, f), h = TJSCALED(height, f);
    if (std::min(w, h) < min_side) continue;
    if (static_cast<int64_t>(f.num) * best.denom < static_cast<int64_t>(best.num) * f.denom)
      best = f;
  }
  return best;
}

// Refuses an image whose header claims more than options.max_pixels pixels, before decoding it.
void check_pixel_limit(int64_t width, int64_t height, const DecodeOptions& options, const std::string& name) {
  const uint64_t pixels = static_cast<uint64_t>(width) * static_cast<uint64_t>(height);  // PNG sides reach 2^32 - 1
  if (options.max_pixels == 0 || pixels <= static_cast<uint64_t>(options.max_pixels)) return;
  throw CorruptImageError(name + ": the header claims " + std::to_string(width) + " x " + std::to_string(height) +
                          " pixels (" + std::to_string(pixels) + "), more than the limit of " +
                          std::to_string(options.max_pixels) +
                          " (a decompression bomb, or a huge image); if it is genuine, raise the limit "
                          "([data] max_image_pixels in a config, --max-image-pixels for cnn_pack; 0: no limit)");
}

int64_t be32(const uint8_t* at) {
  return static_cast<int64_t>(at[0]) << 24 | static_cast<int64_t>(at[1]) << 16 | static_cast<int64_t>(at[2]) << 8 |
         static_cast<int64_t>(at[3]);
}

bool is_png(const uint8_t* bytes, size_t size) {
  static const uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  return size >= 8 && std::memcmp(bytes, kSignature, 8) == 0;
}

// A PNG's width and height from its IHDR chunk, which must come first; false when it is not there.
// (stb_image's own header check refuses very large PNGs with a vaguer "too large".)
bool png_size(const uint8_t* bytes, size_t size, int64_t& width, int64_t& height) {
  if (size < 24 || !is_png(bytes, size) || std::memcmp(bytes + 12, "IHDR", 4) != 0) return false;
  width = be32(bytes + 16);
  height = be32(bytes + 20);
  return true;
}

// Refuses a PNG chunk that claims more bytes than the file has left: stb_image allocates an IDAT
// chunk's claimed length (up to 2^31) before reading it, so 70 bytes could make it allocate 2 GiB.
void check_png_chunks(const uint8_t* bytes, size_t size, const std::string& name) {
  for (size_t at = 8; at + 8 <= size;) {
    const auto length = static_cast<size_t>(be32(bytes + at));
    const std::string type(reinterpret_cast<const char*>(bytes + at + 4), 4);
    const size_t left = size - at - 8;  // the chunk's data and its 4-byte CRC
    if (length + 4 > left)
      throw CorruptImageError(name + ": not a readable image (PNG chunk '" + type + "' claims " +
                              std::to_string(length) + " bytes, more than the " + std::to_string(left) +
                              " left in the file: truncated or corrupt)");
    if (type == "IEND") return;
    at += 12 + length;
  }
}

// Adobe CMYK (inverted: 255 means no ink) to RGB: R = C * K / 255, and so on.
Image cmyk_to_rgb(const std::vector<uint8_t>& cmyk, int height, int width) {
  Image rgb(height, width, 3);
  const size_t pixels = static_cast<size_t>(height) * width;
  for (size_t i = 0; i < pixels; ++i) {
    const int k = cmyk[4 * i + 3];
    for (int c = 0; c < 3; ++c) rgb.pixels[3 * i + c] = static_cast<uint8_t>((cmyk[4 * i + c] * k + 127) / 255);
  }
  return rgb;
}

Image decode_jpeg(const uint8_t* bytes, size_t size, const DecodeOptions& options, const std::string& name) {
  tjhandle tj = decompressor();
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(tj, bytes, static_cast<unsigned long>(size), &width, &height, &subsampling, &colorspace) != 0)
    throw CorruptImageError(name + ": not a readable JPEG (" + tjGetErrorStr2(tj) + ")");
  check_pixel_limit(width, height, options, name);
  const tjscalingfactor scale = choose_scale(width, height, options.min_side);
  const int w = TJSCALED(width, scale), h = TJSCALED(height, scale);
  const bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  const int format = cmyk ? TJPF_CMYK : options.channels == 1 ? TJPF_GRAY : TJPF_RGB;
  std::vector<uint8_t> buffer(static_cast<size_t>(w) * h * tjPixelSize[format]);
  if (tjDecompress2(tj, bytes, static_cast<unsigned long>(size), buffer.data(), w, 0, h, format, 0) != 0) {
    const std::string reason = tjGetErrorStr2(tj);
    // Warnings such as extraneous bytes before a marker leave a complete image; a premature end
    // of data does not (the rest is filled with gray), so it counts as corrupt.
    if (tjGetErrorCode(tj) == TJERR_FATAL || reason.find("Premature end") != std::string::npos)
      throw CorruptImageError(name + ": JPEG data is damaged or truncated (" + reason + ")");
  }
  if (cmyk) return convert_channels(cmyk_to_rgb(buffer, h, w), options.channels);
  Image image;
  image.height = h;
  image.width = w;
  image.channels = tjPixelSize[format];
  image.pixels = std::move(buffer);
  return image;
}

Image decode_with_stb(const uint8_t* bytes, size_t size, const DecodeOptions& options, const std::string& name) {
  CNN_CHECK(size <= static_cast<size_t>(INT32_MAX), name, ": ", size, " bytes is too large for an image file");
  int width = 0, height = 0, channels_in_file = 0;
  // The size the header claims, checked before stb_image allocates anything (0 x 0 when unknown:
  // stbi_load then reports what is wrong).
  int64_t claimed_width = 0, claimed_height = 0;
  if (!png_size(bytes, size, claimed_width, claimed_height) &&
      stbi_info_from_memory(bytes, static_cast<int>(size), &width, &height, &channels_in_file)) {
    claimed_width = width;
    claimed_height = height;
  }
  check_pixel_limit(claimed_width, claimed_height, options, name);
  if (is_png(bytes, size)) check_png_chunks(bytes, size, name);
  struct StbFree {
    void operator()(stbi_uc* p) const { stbi_image_free(p); }
  };
  std::unique_ptr<stbi_uc, StbFree> pixels(stbi_load_from_memory(bytes, static_cast<int>(size), &width, &height,
                                                                  &channels_in_file, options.channels));
  if (!pixels) {
    // stb_image gives no reason for some truncations (a PNG that ends after a whole chunk).
    const char* reason = stbi_failure_reason();
    const bool png_without_end =
        is_png(bytes, size) && std::string_view(reinterpret_cast<const char*>(bytes), size).find("IEND") == std::string_view::npos;
    const std::string why = reason && *reason ? reason
                            : png_without_end ? "the PNG ends before its IEND chunk: the file is truncated"
                                              : "the decoder gave no reason: the file is damaged or truncated";
    throw CorruptImageError(name + ": not a readable image (" + why + ")");
  }
  // stb_image accepts a BMP of height 0; an image without pixels is nothing to train on.
  if (width == 0 || height == 0)
    throw CorruptImageError(name + ": the image is empty (" + std::to_string(width) + " x " + std::to_string(height) +
                            " pixels)");
  Image image(height, width, options.channels);
  std::memcpy(image.pixels.data(), pixels.get(), image.pixels.size());
  return image;
}

}  // namespace

bool looks_like_jpeg(const uint8_t* bytes, size_t size) {
  return size >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF;
}

Image decode_image(const uint8_t* bytes, size_t size, const DecodeOptions& options, const std::string& name) {
  CNN_CHECK(options.channels == 1 || options.channels == 3, "decoding ", name, ": channels must be 1 or 3, not ",
            options.channels);
  CNN_CHECK(options.max_pixels >= 0, "decoding ", name, ": max_pixels must be 0 (no limit) or positive, not ",
            options.max_pixels);
  if (size == 0) throw CorruptImageError(name + ": empty file (zero bytes)");
  if (looks_like_jpeg(bytes, size)) return decode_jpeg(bytes, size, options, name);
  return decode_with_stb(bytes, size, options, name);
}

Image convert_channels(Image image, int channels) {
  if (image.channels == channels) return image;
  CNN_CHECK(channels == 1 || channels == 3 || channels == 4, "cannot convert an image to ", channels, " channels");
  CNN_CHECK(image.channels >= 1 && image.channels <= 4, "cannot convert an image of ", image.channels, " channels");
  Image out(image.height, image.width, channels);
  const size_t pixels = static_cast<size_t>(image.height) * image.width;
  const int in_c = image.channels;
  for (size_t i = 0; i < pixels; ++i) {
    const uint8_t* src = &image.pixels[i * in_c];
    uint8_t* dst = &out.pixels[i * channels];
    const bool gray_in = in_c <= 2;  // gray or gray + alpha
    if (channels == 1) {
      dst[0] = gray_in ? src[0] : static_cast<uint8_t>(luma(src[0], src[1], src[2]) + 0.5f);
    } else {
      for (int c = 0; c < 3; ++c) dst[c] = gray_in ? src[0] : src[c];
      if (channels == 4) dst[3] = (in_c == 2 || in_c == 4) ? src[in_c - 1] : 255;
    }
  }
  return out;
}

}  // namespace cnn::data
