// The schema of training config files: every section and key the trainer knows, each with its
// type, default, allowed range or choices, and a one-line description. Config parsing
// (train/config/config.h) validates against it, and docs/config.md is generated from it.
#pragma once
#include <string>
#include <vector>

namespace cnn::train {

enum class KeyType { boolean, integer, real, text, device, choice, integer_list, real_list, text_list };

// A closed or open interval of numbers; numbers of integer keys and list elements must lie in it.
struct Range {
  static constexpr double kUnbounded = 1e300;  // a range's default: no bound (text keys)
  double min = -kUnbounded, max = kUnbounded;
  bool min_open = false, max_open = false;
  bool contains(double v) const;
  std::string str() const;     // "[0, 1)", ">= 1", "(0, 10]", "any"
  std::string phrase() const;  // " in [0, 1)", " >= 1", "" (any), to follow "a number"
};

struct KeySpec {
  std::string section, key;
  KeyType type = KeyType::text;
  std::string default_value;
  Range range;                       // integer, real and numeric lists
  std::vector<std::string> choices;  // choice
  std::string doc;
  bool may_be_empty = false;  // an empty value is allowed and means "not set" (e.g. the model's own default)

  std::string name() const { return section + "." + key; }
  // "" when `value` is acceptable; otherwise what is wrong and what is allowed.
  std::string validate(const std::string& value) const;
  std::string allowed() const;  // the allowed values in words, for messages and docs
};

// Sections in the order config files and docs list them.
const std::vector<std::string>& config_sections();
// Every key of every section, in documentation order.
const std::vector<KeySpec>& config_schema();
// The spec of section.key, or null.
const KeySpec* find_key(const std::string& section, const std::string& key);

const char* key_type_name(KeyType type);

// Value parsing shared by validation and typed access; each returns false on malformed text.
bool parse_bool(const std::string& text, bool& out);
bool parse_integer(const std::string& text, int64_t& out);
bool parse_real(const std::string& text, double& out);
std::vector<std::string> split_list(const std::string& text);  // comma-separated, trimmed; "" -> {}

// docs/config.md: the schema as Markdown tables, one per section.
std::string config_reference_markdown();

}  // namespace cnn::train
