// FileDataset and the two ways of building one: walking an ImageFolder tree, parsing a list file.
#include "data/file_dataset.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

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

// Why a folder entry that fs::status could not follow is out of reach: a broken link, or the error.
std::string unreachable_reason(const std::string& path, const std::error_code& error) {
  const std::string link = broken_link_reason(path);
  return !link.empty() ? link : error ? error.message() : "it does not exist";
}

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

namespace {
// Whether the folder `outer` is `inner` or holds it (both canonical).
bool holds(const fs::path& outer, const fs::path& inner) {
  return std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end()).first == outer.end();
}

// A walk for image files: the canonical paths of the folders it started from and of every folder
// walked so far. A directory link into one of those, or into a folder that holds a starting folder
// (a link up, such as class/a/up -> ..), would go round: it is not followed.
struct ImageWalk {
  std::vector<fs::path> starts;
  std::set<fs::path> visited;
  LogFn log;
  std::vector<std::string> files;

  // Why the folder `real` (canonical) is not walked; "" when it may be.
  std::string leads_back(const fs::path& real) const {
    if (visited.count(real)) return "it leads back to " + real.string() + ", a folder already walked";
    for (const fs::path& start : starts)
      if (holds(real, start))
        return "it leads back to " + real.string() + ", which holds " + start.string();
    return "";
  }

  // Appends the image files below `folder`, following links that do not lead back. A link that
  // loops or leads nowhere is kept when it is named like an image (loading it raises
  // CorruptImageError: the loader skips and counts it, with its warning) and reported otherwise.
  // Errors never escape as filesystem_errors.
  void walk(const fs::path& folder) {
    std::error_code ec;
    fs::directory_iterator it(folder, ec);
    for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
      const fs::path& path = it->path();
      if (is_hidden(path)) continue;
      const std::string name = path.string();
      std::error_code status_error;
      const fs::file_status status = fs::status(path, status_error);
      if (status_error || !fs::exists(status)) {
        if (has_image_extension(name)) files.push_back(name);
        else log_to(log, "skipping " + name + ": " + unreachable_reason(name, status_error));
      } else if (fs::is_directory(status)) {
        std::error_code canonical_error;
        const fs::path real = fs::canonical(path, canonical_error);
        const std::string back = canonical_error ? canonical_error.message() : leads_back(real);
        if (!back.empty()) {
          log_to(log, "not following " + name + ": " + back);
          continue;
        }
        visited.insert(real);
        walk(path);
      } else if (has_image_extension(name)) {
        files.push_back(name);
      }
    }
    if (ec) log_to(log, "cannot list the folder " + folder.string() + " (" + ec.message() + "); the images in it are left out");
  }
};

// The canonical path of `folder`, a folder that exists.
fs::path canonical_folder(const fs::path& folder) {
  std::error_code ec;
  const fs::path real = fs::canonical(folder, ec);
  CNN_CHECK(!ec, "cannot resolve the folder ", folder.string(), ": ", ec.message());
  return real;
}

// The sorted image files below `folder`; `starts`: the canonical folders a link must not lead
// back to (`folder` among them).
std::vector<std::string> walk_for_images(const fs::path& folder, std::vector<fs::path> starts, const LogFn& log) {
  ImageWalk walk{.starts = starts, .visited = {starts.begin(), starts.end()}, .log = log, .files = {}};
  walk.walk(folder);
  std::sort(walk.files.begin(), walk.files.end());
  return std::move(walk.files);
}
}  // namespace

std::vector<std::string> find_image_files(const std::string& folder, const LogFn& log) {
  return walk_for_images(folder, {canonical_folder(folder)}, log);
}

std::shared_ptr<FileDataset> open_image_folder(const std::string& root, const LogFn& log) {
  std::error_code ec;
  CNN_CHECK(fs::is_directory(root, ec), "ImageFolder ", root, " is not a folder; expected root/<class>/<image files>");
  const fs::path real_root = canonical_folder(root);
  std::vector<std::string> classes;
  fs::directory_iterator it(root, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const fs::path& path = it->path();
    if (is_hidden(path)) continue;
    std::error_code status_error;
    const fs::file_status status = fs::status(path, status_error);
    if (status_error || !fs::exists(status)) {
      log_to(log, "skipping " + path.string() + ": " + unreachable_reason(path.string(), status_error));
    } else if (fs::is_directory(status)) {
      const fs::path real = fs::canonical(path, status_error);
      if (status_error)
        log_to(log, "skipping the folder " + path.string() + ": " + status_error.message());
      else if (holds(real, real_root))  // the root as a class of itself, or a folder above it
        log_to(log, "not following " + path.string() + ": it leads back to " + real.string() + ", which holds the ImageFolder");
      else
        classes.push_back(path.filename().string());
    }
  }
  CNN_CHECK(!ec, "cannot list the ImageFolder ", root, ": ", ec.message());
  std::sort(classes.begin(), classes.end());
  CNN_CHECK(!classes.empty(), "ImageFolder ", root, " has no class subfolders; expected root/<class>/<image files>");
  std::vector<FileDataset::Entry> entries;
  for (size_t c = 0; c < classes.size(); ++c) {
    const fs::path folder = fs::path(root) / classes[c];
    // The root counts as walked: a link back to it would put the other classes' images in this one.
    std::vector<std::string> files = walk_for_images(folder, {real_root, canonical_folder(folder)}, log);
    CNN_CHECK(!files.empty(), "ImageFolder class folder ", folder.string(),
              " holds no image files (.jpg .jpeg .png .bmp .gif .tga .ppm .pgm .pnm); remove it or add images");
    for (auto& f : files) entries.push_back({std::move(f), static_cast<int64_t>(c)});
  }
  return std::make_shared<FileDataset>(std::move(entries), std::move(classes), root);
}

std::shared_ptr<FileDataset> open_list_file(const std::string& path, const ListFileOptions& options) {
  require_regular_file(path, "list file");
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
    if (line_number == 1 && line.starts_with("\xEF\xBB\xBF")) line.erase(0, 3);  // a UTF-8 byte-order mark
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
      CNN_CHECK(label < kMaxClasses, path, ":", r.line, ": label ", label, " is beyond the ", kMaxClasses,
                " classes a dataset may have; labels are class indices 0, 1, ... (or class names)");
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
