// Write-to-temporary, fsync, rename: see atomic_file.h.
#include "engine/io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include "engine/error.h"

namespace cnn::io {

namespace {
// Flushes a file (or a directory's entries) to the disk.
void sync_to_disk(const std::filesystem::path& path, bool directory) {
  const int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) {
    if (directory) return;  // some file systems do not allow opening a directory: nothing to sync then
    throw Error("cannot reopen '" + path.string() + "' to flush it: " + std::strerror(errno));
  }
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && !directory)
    throw Error("cannot flush '" + path.string() + "' to disk: " + std::strerror(err) + "; is the disk full?");
}
}  // namespace

std::filesystem::path temporary_path(const std::filesystem::path& path) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  return tmp;
}

void write_atomically(const std::filesystem::path& path, const std::function<void(const std::filesystem::path&)>& write) {
  const std::filesystem::path tmp = temporary_path(path);
  std::error_code ignored;
  std::filesystem::remove(tmp, ignored);  // a leftover of an interrupted earlier write
  try {
    write(tmp);
    sync_to_disk(tmp, false);
  } catch (...) {
    std::filesystem::remove(tmp, ignored);
    throw;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ignored);
    throw Error("cannot rename '" + tmp.string() + "' to '" + path.string() + "': " + ec.message() +
                "; the previous file (if any) is unchanged");
  }
  const std::filesystem::path parent = path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
  sync_to_disk(parent, true);
}

void write_text_atomically(const std::filesystem::path& path, const std::string& text) {
  write_atomically(path, [&](const std::filesystem::path& tmp) {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) throw Error("cannot write '" + path.string() + "': " + std::strerror(errno) + "; is the disk full, is the folder writable?");
  });
}

}  // namespace cnn::io
