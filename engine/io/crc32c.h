// CRC32C (the Castagnoli polynomial, as in iSCSI, ext4, LevelDB and Google's crc32c library): the
// checksum that cnn's checkpoint and weights files carry per tensor and for their metadata, so that a
// flipped byte is reported by name instead of loading as wrong numbers.
//
// crc32c(data) is the standard value (crc32c("123456789") == 0xE3069283); crc32c_extend continues a
// checksum over more bytes, so crc32c_extend(crc32c(a), b) == crc32c(a + b). On x86-64 processors with
// SSE4.2 it uses the crc32 instruction (several GB/s); elsewhere a table-driven loop (slicing by 8).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace cnn::io {

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size);
inline uint32_t crc32c(const void* data, size_t size) { return crc32c_extend(0, data, size); }
inline uint32_t crc32c(std::string_view text) { return crc32c(text.data(), text.size()); }
// The table-driven path alone (what crc32c_extend uses without SSE4.2), for tests to compare.
uint32_t crc32c_extend_portable(uint32_t crc, const void* data, size_t size);

// A checksum as the 8 lowercase hex digits that files store, and back (false when the text is not
// exactly 8 hex digits).
std::string crc32c_hex(uint32_t crc);
bool parse_crc32c_hex(std::string_view text, uint32_t& crc);

}  // namespace cnn::io
