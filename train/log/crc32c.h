// CRC-32C (Castagnoli), the checksum of TFRecord framing, and TensorFlow's masked form of it
// (rotated and offset so that checksums of data containing checksums stay well distributed).
#pragma once
#include <cstddef>
#include <cstdint>

namespace cnn::train {

// CRC-32C of `size` bytes; pass a previous result as `crc` to continue a running checksum.
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);
// ((crc >> 15) | (crc << 17)) + 0xa282ead8
uint32_t mask_crc32c(uint32_t crc);

}  // namespace cnn::train
