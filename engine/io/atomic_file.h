// Atomic replacement of a file: the content is written to "<path>.tmp", flushed to disk, and then
// renamed over <path>, so that a crash or an error during the write never leaves a corrupt or
// half-written file under <path>; the previous version stays loadable until the new one is complete.
#pragma once
#include <filesystem>
#include <functional>
#include <string>

namespace cnn::io {

// The temporary file a write of `path` goes through.
std::filesystem::path temporary_path(const std::filesystem::path& path);

// Calls write(temporary_path(path)), which must create and close that file; then syncs it to disk
// and renames it to `path`. If write throws, the temporary file is removed and the exception passes
// on; `path` is untouched.
void write_atomically(const std::filesystem::path& path, const std::function<void(const std::filesystem::path&)>& write);

// `text` as the whole content of `path`, atomically; a cnn::Error naming the file (and asking
// whether the disk is full) when it cannot be written, the previous content kept.
void write_text_atomically(const std::filesystem::path& path, const std::string& text);

}  // namespace cnn::io
