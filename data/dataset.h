// The dataset interface: a fixed number of samples, each an 8-bit HWC image and an integer label,
// with class names. Implementations: in-memory arrays (IDX, CIFAR; array_dataset.h), image files
// listed by a folder tree or a list file (file_dataset.h) and files packed by cnn_pack
// (packed_dataset.h). load() is called from many loader threads at once and must be thread-safe.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/decode.h"
#include "data/image.h"

namespace cnn::data {

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual int64_t size() const = 0;
  // The label of sample `index`, known without decoding it.
  virtual int64_t label(int64_t index) const = 0;
  // Decodes sample `index` with `options.channels` channels. Data that cannot be decoded raises
  // CorruptImageError (which the loader may skip); anything else raises cnn::Error.
  virtual Image load(int64_t index, const DecodeOptions& options) const = 0;
  // Where sample `index` comes from, for messages: a file path, or "file.h5 [index]".
  virtual std::string source(int64_t index) const = 0;

  const std::vector<std::string>& class_names() const { return class_names_; }
  int64_t num_classes() const { return static_cast<int64_t>(class_names_.size()); }

 protected:
  // Checks at start-up that every label is in [0, num_classes) and that no class name holds a line
  // break; `where` names the dataset.
  void check_labels(const std::string& where) const;

  std::vector<std::string> class_names_;
};

using DatasetPtr = std::shared_ptr<const Dataset>;

// The whole file as bytes. A file that cannot be opened or read is a CorruptImageError (the loader
// skips it): files may vanish or turn unreadable while a run is going. Only regular files are read:
// a FIFO, socket or device named like an image is refused without blocking, and the read stops at
// the size the file had when it was opened.
std::vector<uint8_t> read_file_bytes(const std::string& path);

// Throws cnn::Error naming `what` and `path` unless `path` is a regular file (after links): a
// dataset or list file that is a FIFO would otherwise block its reader in open() for ever. stat()
// itself never blocks.
void require_regular_file(const std::string& path, const std::string& what);

// "a folder", "a FIFO (named pipe)", "a socket", "a device" or "a regular file", for a stat mode.
std::string file_kind(unsigned mode);

// Why `path` cannot be opened when it is a symbolic link that loops or whose target does not exist
// ("a symbolic link that loops back on itself", "a symbolic link to x.jpg, which does not exist"); ""
// otherwise.
std::string broken_link_reason(const std::string& path);

// Where the data library's warnings go (LoaderOptions::log, open_image_folder's log, ...): to `log`
// when it is set, else to standard error, prefixed "cnn data: ".
using LogFn = std::function<void(const std::string&)>;
void log_to(const LogFn& log, const std::string& message);

// The most classes a dataset may have: far beyond any real label set (ImageNet-21k has 21,841), and
// a bound on what a label index in a list file can make cnn allocate (one name per class).
inline constexpr int64_t kMaxClasses = 1 << 20;

// "0", "1", ..., for datasets that carry no class names; count is at most kMaxClasses.
std::vector<std::string> numbered_class_names(int64_t count);

}  // namespace cnn::data
