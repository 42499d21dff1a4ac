// Datasets of encoded image files on disk, each sample one file decoded when loaded:
//  - an ImageFolder tree: root/<class>/.../<image>, classes sorted by folder name, files sorted by
//    path, only files with an image extension (.jpg .jpeg .png .bmp .gif .tga .ppm .pgm .pnm);
//  - a list file: CSV lines "path,label" (an optional header line; paths relative to the list
//    file's folder; labels all class indices or all class names).
// Start-up problems (an empty class folder, a label out of range, a listed file that does not
// exist) are cnn::Errors naming the folder or file:line. A file that turns out unreadable later
// (also a symbolic link that loops or leads nowhere) raises CorruptImageError when loaded.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace cnn::data {

class FileDataset : public Dataset {
 public:
  struct Entry {
    std::string path;
    int64_t label;
  };
  FileDataset(std::vector<Entry> entries, std::vector<std::string> class_names, std::string name);

  int64_t size() const override { return static_cast<int64_t>(entries_.size()); }
  int64_t label(int64_t index) const override { return entries_[static_cast<size_t>(index)].label; }
  Image load(int64_t index, const DecodeOptions& options) const override;
  std::string source(int64_t index) const override { return entries_[static_cast<size_t>(index)].path; }
  std::vector<uint8_t> encoded(int64_t index) const { return read_file_bytes(source(index)); }

  const std::vector<Entry>& entries() const { return entries_; }
  const std::string& name() const { return name_; }

 private:
  std::vector<Entry> entries_;
  std::string name_;
};

// Links are followed, except a directory link into a folder already walked (a link back up, such
// as class/a/up -> .., or to the root): that one is reported through `log` and left out, so the walk
// always ends. A link that loops or leads nowhere becomes a sample when it is named like an image
// (loading it raises CorruptImageError, so the loader skips and counts it) and is reported otherwise.
// `log`: default standard error (log_to in dataset.h).
std::shared_ptr<FileDataset> open_image_folder(const std::string& root, const LogFn& log = {});

// The image files below `folder` (recursive, sorted, hidden files and folders left out), links
// treated as open_image_folder treats them.
std::vector<std::string> find_image_files(const std::string& folder, const LogFn& log = {});

struct ListFileOptions {
  // Whether the first line is a header; unset: it is when its label field is not a class index and
  // reads "label" or "class", or its path field reads "path", "file", "filename" or "image".
  std::optional<bool> header;
  // Class names in label order. Empty: numbered 0 .. max index for index labels, or the distinct
  // names sorted (as ImageFolder sorts folders) for name labels.
  std::vector<std::string> class_names;
};

std::shared_ptr<FileDataset> open_list_file(const std::string& path, const ListFileOptions& options = {});

// True for the file extensions ImageFolder picks up (case-insensitive).
bool has_image_extension(const std::string& path);

}  // namespace cnn::data
