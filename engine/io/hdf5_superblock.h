// A check of the HDF5 superblock of a file that cnn did not write (no checksum table), before the
// HDF5 library opens it. The library trusts the sizes and addresses in the superblock: a damaged or
// hostile one made it allocate 4 GiB for a "driver info block" whose 4-byte size field read
// 0xffffffe4, inside H5Fopen and before any of cnn's checks could run.
//
// The check reads the superblock itself (versions 0 and 1 of the format, written by HDF5 by default
// and by h5py; versions 2 and 3, written with libver="latest") and refuses, naming the field:
//   - offsets or lengths that are not 8 bytes (HDF5's default; every cnn and h5py file),
//   - a base address other than 0 (the superblock is at the start: files with a user block must
//     carry cnn's checksum table),
//   - an end-of-file address beyond the file's real size (a truncated file),
//   - a driver info block (files of HDF5's family, multi or split drivers, which cnn does not read),
//   - a root group, free-space or extension address at or beyond the end of file.
// What it cannot catch (damaged object headers, B-trees or heaps deeper in the file) remains the
// library's to refuse; cnn's own files are protected by their checksum table instead.
#pragma once
#include <filesystem>

namespace cnn::io {

// Throws cnn::Error naming the file and the implausible field; returns when the superblock at the
// start of `path` is one the library can open without trusting a size it cannot check.
void check_foreign_superblock(const std::filesystem::path& path);

}  // namespace cnn::io
