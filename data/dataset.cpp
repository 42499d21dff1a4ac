// Helpers shared by the datasets: label checks, whole-file reads, default class names.
#include "data/dataset.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cnn::data {

void Dataset::check_labels(const std::string& where) const {
  const int64_t classes = num_classes();
  CNN_CHECK(classes > 0, where, ": the dataset has no classes");
  for (int64_t i = 0, n = size(); i < n; ++i) {
    const int64_t y = label(i);
    CNN_CHECK(y >= 0 && y < classes, where, ": sample ", i, " (", source(i), ") has label ", y, ", outside [0, ",
              classes, "); fix the label or the class list");
  }
}

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw CorruptImageError(path + ": cannot open (" + std::strerror(errno) + ")");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0) throw CorruptImageError(path + ": cannot stat (" + std::strerror(errno) + ")");
  if (!S_ISREG(info.st_mode)) throw CorruptImageError(path + ": not a regular file");
  std::vector<uint8_t> bytes(static_cast<size_t>(info.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t got = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw CorruptImageError(path + ": read error (" + std::strerror(errno) + ")");
    if (got == 0) break;  // the file shrank since fstat
    done += static_cast<size_t>(got);
  }
  bytes.resize(done);
  return bytes;
}

std::vector<std::string> numbered_class_names(int64_t count) {
  std::vector<std::string> names;
  for (int64_t i = 0; i < count; ++i) names.push_back(std::to_string(i));
  return names;
}

}  // namespace cnn::data
