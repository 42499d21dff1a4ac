// The run folder's lock (see run_lock.h).
#include "train/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "engine/error.h"

namespace cnn::train {

std::shared_ptr<void> lock_run_folder(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / ".lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  CNN_CHECK(fd >= 0, "cannot open the run folder's lock ", path.string(), ": ", std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    CNN_CHECK(err != EWOULDBLOCK, "another cnn_train is running in ", dir.string(),
              " (it holds ", path.string(), "); wait for it to finish or stop it, or start a new run folder");
    CNN_FAIL("cannot lock the run folder ", dir.string(), ": ", std::strerror(err));
  }
  // The lock lives as long as the descriptor; the shared_ptr closes it with the last copy.
  return std::shared_ptr<void>(new int(fd), [](void* p) {
    const int* held = static_cast<int*>(p);
    ::close(*held);
    delete held;
  });
}

}  // namespace cnn::train
