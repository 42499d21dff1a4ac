// Config parsing: inih's callback parser fed line by line from memory, so that every key, section
// header and malformed line is known with its line number; all problems are collected and reported
// together before anything else happens. The reader hands inih only what it parses well: comments
// become empty lines (so they may be any length), section headers lose the spaces inside their
// brackets, and a UTF-8 byte-order mark at the start of the text is skipped.
#include "train/config/config.h"

#include <ini.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "engine/error.h"
#include "engine/closest_match.h"
#include "train/config/schema.h"

namespace cnn::train {

namespace {

// The longest line that is not a comment. Debian's libinih sizes its line buffer at run time
// (ini_max_line: the line, its '\n' and the '\0'; the reader strips '\r'); its default is 200.
constexpr size_t kMaxLine = 4096;

// inih's whitespace (isspace), so that a --set value is trimmed as a value in a file is.
constexpr const char* kSpace = " \t\n\v\f\r";

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

// "" or "; did you mean 'x'?"
std::string suggestion(const std::string& word, const std::vector<std::string>& candidates, const char* before,
                       const char* after) {
  const std::string match = closest_match(word, candidates);
  return match.empty() ? "" : std::string("; did you mean ") + before + match + after + "?";
}

std::vector<std::string> keys_of(const std::string& section) {
  std::vector<std::string> keys;
  for (const KeySpec& k : config_schema())
    if (k.section == section) keys.push_back(k.key);
  return keys;
}

bool known_section(const std::string& section) {
  const auto& s = config_sections();
  return std::find(s.begin(), s.end(), section) != s.end();
}

// Why section.key is not a key, with the likeliest intended name.
std::string unknown_key_message(const std::string& section, const std::string& key) {
  if (!known_section(section)) {
    std::string all;
    for (const std::string& s : config_sections()) all += (all.empty() ? "" : ", ") + s;
    return "unknown section [" + section + "]" + suggestion(section, config_sections(), "[", "]") + " (sections: " +
           all + ")";
  }
  std::string hint = suggestion(key, keys_of(section), "'", "'");
  if (hint.empty())  // every section that has the key ([optim] lr and [swa] lr)
    for (const std::string& other : config_sections())
      if (find_key(other, key)) hint += (hint.empty() ? "; it belongs in [" : " or [") + other + "]";
  return "unknown key '" + key + "' in [" + section + "]" + hint + " (see docs/config.md for every key)";
}

std::string bad_value_message(const KeySpec& spec, const std::string& value, const std::string& why) {
  return "[" + spec.section + "] " + spec.key + " = '" + value + "': " + why + "; allowed: " + spec.allowed();
}

// Strips one pair of surrounding double quotes ("" is the empty value).
std::string unquote(const std::string& value) {
  if (value.size() >= 2 && value.front() == '"' && value.back() == '"') return value.substr(1, value.size() - 2);
  return value;
}

// Why a --set value could not be written in a config file ("" when it could): the resolved config
// (config.ini in the run folder, which --resume reads) must parse back to the same values. inih
// ends a value at a ';' that follows whitespace (an inline comment), and at the end of the line.
std::string not_ini_representable(const std::string& value) {
  if (value.find_first_of(std::string("\n\0", 2)) != std::string::npos) return "it holds a line break or a NUL byte";
  for (size_t i = 0; i < value.size(); ++i)
    if (value[i] == ';' && (i == 0 || std::strchr(kSpace, value[i - 1])))
      return "a ';' at its start or after a space would start a comment in the config file";
  return "";
}

// A value as to_ini writes it: quoted when reading it back would otherwise strip its quotes or
// its surrounding whitespace.
std::string ini_value(const std::string& value) {
  const bool quoted = value.size() >= 2 && value.front() == '"' && value.back() == '"';
  if (quoted || (!value.empty() && trim(value) != value)) return '"' + value + '"';
  return value;
}

// State of one parse, shared by the line reader and the key handler.
struct Parse {
  std::string source;
  const std::string* text = nullptr;
  size_t pos = 0;
  int line = 0;  // number of the line last handed to inih
  std::vector<std::pair<int, std::string>> problems;
  std::map<std::string, int> seen;  // section.key -> line
  std::map<std::string, std::pair<std::string, std::string>> assignments;  // section.key -> (value, origin)

  void problem(int at, const std::string& what) { problems.emplace_back(at, what); }
};

// inih's reader: the next line, without its leading whitespace (so indented keys are keys, never
// continuation lines). Section headers and lines that are neither comments nor assignments are
// checked here, where their line number is known.
char* next_line(char* out, int size, void* stream) {
  Parse& p = *static_cast<Parse*>(stream);
  if (p.pos >= p.text->size()) return nullptr;
  size_t end = p.text->find('\n', p.pos);
  const size_t next = end == std::string::npos ? p.text->size() : end + 1;
  if (end == std::string::npos) end = p.text->size();
  const std::string raw = p.text->substr(p.pos, end - p.pos);
  p.pos = next;
  ++p.line;
  std::string line = trim(raw);
  const size_t limit = std::min(kMaxLine, static_cast<size_t>(size) - 2);  // room for '\n' and '\0'
  if (!line.empty() && (line.front() == ';' || line.front() == '#')) {
    line = "";  // a comment: nothing for inih to parse
  } else if (line.size() > limit) {
    p.problem(p.line, "the line has " + std::to_string(line.size()) + " characters; lines may have up to " +
                          std::to_string(limit) + " (comments any number): shorten it");
    line = "";
  } else if (!line.empty() && line.front() == '[') {
    const size_t close = line.find(']');
    if (close == std::string::npos) {
      p.problem(p.line, "section header '" + line + "' lacks its closing ']'");
      line = "";
    } else {
      // inih keeps the spaces of "[ model ]" in the name: it gets "[model]".
      const std::string section = trim(line.substr(1, close - 1));
      if (!known_section(section)) p.problem(p.line, unknown_key_message(section, ""));
      const std::string after = trim(line.substr(close + 1));
      if (!after.empty() && after.front() != ';' && after.front() != '#')
        p.problem(p.line, "text after the section header's ']': '" + after + "'; put each key on a line of its own");
      line = "[" + section + "]";
    }
  } else if (!line.empty() && line.find('=') == std::string::npos) {
    p.problem(p.line, "'" + line + "' is neither a [section] header nor a 'key = value' line");
    line = "";
  }
  std::memcpy(out, line.data(), line.size());
  out[line.size()] = '\n';
  out[line.size() + 1] = '\0';
  return out;
}

int on_key(void* user, const char* section_c, const char* key_c, const char* value_c) {
  Parse& p = *static_cast<Parse*>(user);
  const std::string section = section_c, key = key_c, value = unquote(value_c);
  if (section.empty()) {
    p.problem(p.line, "key '" + key + "' comes before any [section] header");
    return 1;
  }
  if (!known_section(section)) return 1;  // reported at the header
  const KeySpec* spec = find_key(section, key);
  if (!spec) {
    p.problem(p.line, unknown_key_message(section, key));
    return 1;
  }
  const std::string name = spec->name();
  if (const auto it = p.seen.find(name); it != p.seen.end()) {
    p.problem(p.line, "[" + section + "] " + key + " is set twice (first at line " + std::to_string(it->second) +
                          "); keep one");
    return 1;
  }
  p.seen[name] = p.line;
  if (const std::string why = spec->validate(value); !why.empty()) {
    p.problem(p.line, bad_value_message(*spec, value, why));
    return 1;
  }
  p.assignments[name] = {value, p.source + ":" + std::to_string(p.line)};
  return 1;
}

}  // namespace

Config::Config() {
  for (const KeySpec& k : config_schema()) values_[k.name()] = {k.default_value, "default"};
}

namespace {
// " for example DIR/x.ini" for the first INI file in `dir` (by name), "" when it has none.
std::string ini_file_example(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> found;
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ignored))
    if (entry.path().extension() == ".ini") found.push_back(entry.path());
  if (found.empty()) return "";
  return ", for example " + std::min_element(found.begin(), found.end())->string();
}
}  // namespace

Config Config::load(const std::filesystem::path& path, const std::vector<std::string>& overrides) {
  // A directory opens as a stream that reads nothing, which would parse as every default.
  CNN_CHECK(!std::filesystem::is_directory(path), "config file '", path.string(),
            "' is a directory, not a config file; give an INI file", ini_file_example(path));
  std::ifstream in(path);
  CNN_CHECK(in, "config file '", path.string(), "' cannot be read; check the path (and that it is a file)");
  std::ostringstream text;
  text << in.rdbuf();
  Config config = parse(text.str(), path.string(), overrides);
  config.source_ = path.string();
  return config;
}

Config Config::parse(const std::string& text, const std::string& source, const std::vector<std::string>& overrides) {
  // Once per process: Debian's libinih reads its line buffer's size from this variable (a line of
  // kMaxLine characters, its '\n' and the '\0').
  static const bool line_buffer_sized = (ini_max_line = static_cast<int>(kMaxLine) + 2, true);
  (void)line_buffer_sized;
  Parse p;
  p.source = source;
  p.text = &text;
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) p.pos = 3;  // a UTF-8 byte-order mark
  // The line reader stops at a NUL byte: a value holding one would be cut short without a word.
  int line = 1, last_reported = 0;
  for (const char c : text) {
    if (c == '\n') ++line;
    if (c != '\0' || line == last_reported) continue;
    p.problem(line, "a NUL byte (\\0) in this line; the line would be read only up to it; remove it");
    last_reported = line;
  }
  const int syntax_error = ini_parse_stream(next_line, &p, on_key, &p);
  if (syntax_error > 0 &&
      std::none_of(p.problems.begin(), p.problems.end(), [&](const auto& e) { return e.first == syntax_error; }))
    p.problem(syntax_error, "cannot parse this line");
  if (!p.problems.empty()) {
    std::stable_sort(p.problems.begin(), p.problems.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::string message = "config " + source + " is refused (" + std::to_string(p.problems.size()) +
                           (p.problems.size() == 1 ? " problem" : " problems") + "; nothing was run):";
    for (const auto& [line, what] : p.problems) message += "\n  " + source + ":" + std::to_string(line) + ": " + what;
    throw Error(message);
  }
  Config config;
  for (const auto& [name, assignment] : p.assignments) config.values_[name] = {assignment.first, assignment.second};
  for (const std::string& o : overrides) config.apply_override(o);
  return config;
}

void Config::apply_override(const std::string& assignment) {
  const size_t eq = assignment.find('=');
  const std::string name = trim(assignment.substr(0, eq));
  const size_t dot = name.find('.');
  CNN_CHECK(eq != std::string::npos && dot != std::string::npos, "--set '", assignment,
            "': expected section.key=value, for example --set optim.lr=0.05");
  const std::string section = name.substr(0, dot), key = name.substr(dot + 1);
  const std::string value = unquote(trim(assignment.substr(eq + 1)));
  const KeySpec* spec = find_key(section, key);
  CNN_CHECK(spec != nullptr, "--set '", assignment, "': ", unknown_key_message(section, key));
  set(name, value, "--set");
}

void Config::set(const std::string& name, const std::string& value, const std::string& origin) {
  const size_t dot = name.find('.');
  const KeySpec* spec = dot == std::string::npos ? nullptr : find_key(name.substr(0, dot), name.substr(dot + 1));
  CNN_CHECK(spec != nullptr, "config key '", name, "' is not in the schema (train/config/schema.cpp)");
  const std::string where = origin == "--set" ? "--set '" + name + "=" + value + "'" : origin;
  const std::string unwritable = not_ini_representable(value);
  CNN_CHECK(unwritable.empty(), where, ": the value cannot be written in a config file: ", unwritable);
  const std::string why = spec->validate(value);
  CNN_CHECK(why.empty(), where, ": ", bad_value_message(*spec, value, why));
  values_[name] = {value, origin};
}

const Config::Value& Config::value(const std::string& name, const char* access) const {
  const Value& found = entry(name);
  const size_t dot = name.find('.');
  const KeySpec& spec = *find_key(name.substr(0, dot), name.substr(dot + 1));
  const std::string type = key_type_name(spec.type);
  const bool text_like = spec.type == KeyType::text || spec.type == KeyType::choice || spec.type == KeyType::device;
  CNN_CHECK(type == access || (text_like && std::string(access) == "text"), "config key '", name, "' is a ", type,
            " key, read as ", access);
  return found;
}

bool Config::boolean(const std::string& name) const {
  bool b = false;
  parse_bool(value(name, "bool").text, b);
  return b;
}
int64_t Config::integer(const std::string& name) const {
  int64_t i = 0;
  parse_integer(value(name, "int").text, i);
  return i;
}
double Config::real(const std::string& name) const {
  double d = 0;
  parse_real(value(name, "real").text, d);
  return d;
}
std::optional<double> Config::optional_real(const std::string& name) const {
  if (value(name, "real").text.empty()) return std::nullopt;
  return real(name);
}
std::optional<int64_t> Config::optional_integer(const std::string& name) const {
  if (value(name, "int").text.empty()) return std::nullopt;
  return integer(name);
}
const std::string& Config::text(const std::string& name) const { return value(name, "text").text; }
namespace {
// The items of a validated list value, parsed.
template <class T>
std::vector<T> parse_items(const std::string& text, bool (*parse)(const std::string&, T&)) {
  std::vector<T> out;
  for (const std::string& item : split_list(text)) parse(item, out.emplace_back());
  return out;
}
}  // namespace

std::vector<int64_t> Config::integers(const std::string& name) const {
  return parse_items<int64_t>(value(name, "int list").text, parse_integer);
}
std::vector<double> Config::reals(const std::string& name) const {
  return parse_items<double>(value(name, "real list").text, parse_real);
}
std::vector<std::string> Config::texts(const std::string& name) const {
  return split_list(value(name, "text list").text);
}

const Config::Value& Config::entry(const std::string& name) const {
  const auto it = values_.find(name);
  CNN_CHECK(it != values_.end(), "config key '", name, "' is not in the schema (train/config/schema.cpp)");
  return it->second;
}

const std::string& Config::origin(const std::string& name) const { return entry(name).origin; }
const std::string& Config::written(const std::string& name) const { return entry(name).text; }

std::string Config::to_ini() const {
  std::ostringstream out;
  out << "; resolved training configuration: every key, with its value\n";
  for (const std::string& section : config_sections()) {
    out << "\n[" << section << "]\n";
    for (const KeySpec& k : config_schema())
      if (k.section == section) out << k.key << " = " << ini_value(values_.at(k.name()).text) << "\n";
  }
  return out.str();
}

bool Config::operator==(const Config& other) const {
  if (values_.size() != other.values_.size()) return false;
  for (const auto& [name, v] : values_)
    if (other.values_.at(name).text != v.text) return false;
  return true;
}

}  // namespace cnn::train
