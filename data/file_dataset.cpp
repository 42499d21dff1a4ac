// FileDataset and the two ways of building one: walking an ImageFolder tree, parsing a list file.
#include "data/file_dataset.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>

namespace fs = std::filesystem;

namespace cnn::data {

FileDataset::FileDataset(std::vector<Entry> entries, std::vector<std::string> class_names, std::string name)
    : entries_(std::move(entries)), name_(std::move(name)) {
  class_names_ = std::move(class_names);
  CNN_CHECK(!entries_.empty(), name_, ": the dataset has no images");
  check_labels(name_);
}

Image FileDataset::load(int64_t index, const DecodeOptions& options) const {
  const std::string& path = source(index);
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  return decode_image(bytes.data(), bytes.size(), options, path);
}

namespace {
std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  size_t begin = 0, end = s.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(s[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(s[end - 1]))) --end;
  return s.substr(begin, end - begin);
}

std::optional<int64_t> parse_index(const std::string& text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || text.empty()) return std::nullopt;
  return value;
}

bool is_hidden(const fs::path& p) { return !p.filename().empty() && p.filename().string()[0] == '.'; }

// "path,label" with the path optionally double-quoted ("" inside quotes is a quote); without
// quotes the last comma separates the fields, so paths may contain commas.
bool split_line(const std::string& line, std::string& path, std::string& label) {
  if (!line.empty() && line[0] == '"') {
    path.clear();
    size_t i = 1;
    for (; i < line.size(); ++i) {
      if (line[i] == '"') {
        if (i + 1 < line.size() && line[i + 1] == '"') {
          path += '"';
          ++i;
          continue;
        }
        break;
      }
      path += line[i];
    }
    const size_t comma = line.find(',', i);
    if (i >= line.size() || comma == std::string::npos) return false;
    label = trim(line.substr(comma + 1));
    return true;
  }
  const size_t comma = line.rfind(',');
  if (comma == std::string::npos) return false;
  path = trim(line.substr(0, comma));
  label = trim(line.substr(comma + 1));
  return true;
}

bool looks_like_header(const std::string& path, const std::string& label) {
  if (parse_index(label)) return false;
  const std::string p = lower(path), l = lower(label);
  return l == "label" || l == "class" || p == "path" || p == "file" || p == "filename" || p == "image";
}
}  // namespace

bool has_image_extension(const std::string& path) {
  static const char* const kExtensions[] = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tga", ".ppm", ".pgm", ".pnm"};
  const std::string ext = lower(fs::path(path).extension().string());
  return std::any_of(std::begin(kExtensions), std::end(kExtensions), [&](const char* e) { return ext == e; });
}

std::shared_ptr<FileDataset> open_image_folder(const std::string& root) {
  std::error_code ec;
  CNN_CHECK(fs::is_directory(root, ec), "ImageFolder ", root, " is not a folder; expected root/<class>/<image files>");
  std::vector<std::string> classes;
  for (const auto& item : fs::directory_iterator(root))
    if (item.is_directory() && !is_hidden(item.path())) classes.push_back(item.path().filename().string());
  std::sort(classes.begin(), classes.end());
  CNN_CHECK(!classes.empty(), "ImageFolder ", root, " has no class subfolders; expected root/<class>/<image files>");
  std::vector<FileDataset::Entry> entries;
  for (size_t c = 0; c < classes.size(); ++c) {
    const fs::path folder = fs::path(root) / classes[c];
    std::vector<std::string> files;
    for (auto it = fs::recursive_directory_iterator(folder, fs::directory_options::follow_directory_symlink);
         it != fs::recursive_directory_iterator(); ++it) {
      if (is_hidden(it->path())) {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      if (!it->is_directory() && has_image_extension(it->path().string())) files.push_back(it->path().string());
    }
    CNN_CHECK(!files.empty(), "ImageFolder class folder ", folder.string(),
              " holds no image files (.jpg .jpeg .png .bmp .gif .tga .ppm .pgm .pnm); remove it or add images");
    std::sort(files.begin(), files.end());
    for (auto& f : files) entries.push_back({std::move(f), static_cast<int64_t>(c)});
  }
  return std::make_shared<FileDataset>(std::move(entries), std::move(classes), root);
}

std::shared_ptr<FileDataset> open_list_file(const std::string& path, const ListFileOptions& options) {
  std::ifstream in(path);
  CNN_CHECK(in.good(), "cannot open list file ", path);
  const fs::path base = fs::path(path).parent_path();
  struct Row {
    std::string path, label;
    int line;
  };
  std::vector<Row> rows;
  int line_number = 0;
  bool seen_first_line = false;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string stripped = trim(line);
    if (stripped.empty() || stripped[0] == '#') continue;
    Row row{"", "", line_number};
    CNN_CHECK(split_line(stripped, row.path, row.label) && !row.path.empty() && !row.label.empty(), path, ":",
              line_number, ": expected \"path,label\", got \"", stripped, "\"");
    const bool first = !seen_first_line;
    seen_first_line = true;
    if (first && options.header.value_or(looks_like_header(row.path, row.label))) continue;
    rows.push_back(std::move(row));
  }
  CNN_CHECK(!rows.empty(), "list file ", path, " lists no images");

  const bool by_index = std::all_of(rows.begin(), rows.end(), [](const Row& r) { return parse_index(r.label); });
  std::vector<std::string> classes = options.class_names;
  std::map<std::string, int64_t> index_of;
  if (!by_index) {
    if (classes.empty()) {
      for (const Row& r : rows) index_of.emplace(r.label, 0);
      for (auto& [name, index] : index_of) {
        index = static_cast<int64_t>(classes.size());
        classes.push_back(name);
      }
    } else {
      for (size_t i = 0; i < classes.size(); ++i) index_of.emplace(classes[i], static_cast<int64_t>(i));
    }
  }
  std::vector<FileDataset::Entry> entries;
  std::vector<std::string> missing;
  int64_t largest = -1;
  for (const Row& r : rows) {
    int64_t label = 0;
    if (by_index) {
      label = *parse_index(r.label);
      CNN_CHECK(label >= 0, path, ":", r.line, ": negative label ", label);
      CNN_CHECK(classes.empty() || label < static_cast<int64_t>(classes.size()), path, ":", r.line, ": label ", label,
                " is outside [0, ", classes.size(), ") of the ", classes.size(), " class names given");
      largest = std::max(largest, label);
    } else {
      const auto it = index_of.find(r.label);
      CNN_CHECK(it != index_of.end(), path, ":", r.line, ": class \"", r.label, "\" is not among the ",
                classes.size(), " class names given");
      label = it->second;
    }
    const fs::path file = fs::path(r.path).is_absolute() ? fs::path(r.path) : base / r.path;
    std::error_code ec;
    if (!fs::exists(file, ec)) missing.push_back(path + ":" + std::to_string(r.line) + ": " + file.string());
    entries.push_back({file.string(), label});
  }
  if (!missing.empty()) {
    std::string list;
    for (size_t i = 0; i < std::min<size_t>(missing.size(), 5); ++i) list += "\n  " + missing[i];
    throw Error("list file " + path + ": " + std::to_string(missing.size()) + " listed file(s) do not exist:" + list +
                (missing.size() > 5 ? "\n  ..." : "") + "\nfix the paths (relative to the list file's folder)");
  }
  if (classes.empty()) classes = numbered_class_names(largest + 1);
  return std::make_shared<FileDataset>(std::move(entries), std::move(classes), path);
}

}  // namespace cnn::data
