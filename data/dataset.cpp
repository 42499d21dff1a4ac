// Helpers shared by the datasets: label checks, whole-file reads, broken links, warnings, default
// class names.
#include "data/dataset.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace cnn::data {

void Dataset::check_labels(const std::string& where) const {
  const int64_t classes = num_classes();
  CNN_CHECK(classes > 0, where, ": the dataset has no classes");
  // classes.txt, list files and the logs hold a class name per line.
  for (const std::string& name : class_names_)
    CNN_CHECK(name.find_first_of("\n\r") == std::string::npos, where, ": the class name '", name,
              "' holds a line break, and classes.txt and list files hold one name per line; rename that class");
  for (int64_t i = 0, n = size(); i < n; ++i) {
    const int64_t y = label(i);
    CNN_CHECK(y >= 0 && y < classes, where, ": sample ", i, " (", source(i), ") has label ", y, ", outside [0, ",
              classes, "); fix the label or the class list");
  }
}

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  // O_NONBLOCK: opening a FIFO without a writer would block; a regular file reads as usual.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int error = errno;
    const std::string link = broken_link_reason(path);
    throw CorruptImageError(path + ": cannot open (" + (link.empty() ? std::strerror(error) : link) + ")");
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0) throw CorruptImageError(path + ": cannot stat (" + std::strerror(errno) + ")");
  if (!S_ISREG(info.st_mode)) throw CorruptImageError(path + ": not a regular file (" + file_kind(info.st_mode) + ")");
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

void require_regular_file(const std::string& path, const std::string& what) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    const int error = errno;
    const std::string link = broken_link_reason(path);
    CNN_FAIL(what, " ", path, (error == ENOENT && link.empty() ? " does not exist" : " cannot be read"), " (",
             link.empty() ? std::strerror(error) : link, ")");
  }
  CNN_CHECK(S_ISREG(info.st_mode), what, " ", path, " is not a regular file but ", file_kind(info.st_mode),
            "; point at the file itself");
}

std::string file_kind(unsigned mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return S_ISREG(mode) ? "a regular file" : "not a regular file";
}

std::string broken_link_reason(const std::string& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0 || !S_ISLNK(info.st_mode)) return "";
  if (::stat(path.c_str(), &info) == 0) return "";
  if (errno == ELOOP) return "a symbolic link that loops back on itself";
  if (errno != ENOENT) return "";
  char target[4096];
  const ssize_t length = ::readlink(path.c_str(), target, sizeof target);
  return "a symbolic link to " + (length > 0 ? std::string(target, static_cast<size_t>(length)) : std::string("a path")) +
         ", which does not exist";
}

void log_to(const LogFn& log, const std::string& message) {
  if (log) log(message);
  else std::fprintf(stderr, "cnn data: %s\n", message.c_str());
}

std::vector<std::string> numbered_class_names(int64_t count) {
  CNN_CHECK(count >= 0 && count <= kMaxClasses, "numbered_class_names: ", count, " classes is outside [0, ",
            kMaxClasses, "]");
  std::vector<std::string> names;
  for (int64_t i = 0; i < count; ++i) names.push_back(std::to_string(i));
  return names;
}

}  // namespace cnn::data
