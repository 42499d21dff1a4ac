// What the first bytes of a file say it is, for the messages about a file of the wrong kind:
// "magic 0x89504e47, a PNG image". Used where a reader finds a format it does not read (an IDX
// file that is not IDX, a packed dataset that is not HDF5).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace cnn::data {

// "magic 0x12345678" (the first four bytes, big-endian; fewer when the file is shorter), followed
// by ", a PNG image" (or a JPEG, GIF or BMP image, an HDF5, gzip, zip or IDX file, text) when the
// bytes are a signature it knows; "an empty file" for no bytes.
std::string describe_signature(const uint8_t* bytes, size_t size);

// The same for the first bytes of the file at `path` ("unreadable" when it cannot be opened).
std::string describe_file_start(const std::string& path);

}  // namespace cnn::data
