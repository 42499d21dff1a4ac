// A training configuration: INI text parsed with inih, validated against the schema
// (train/config/schema.h), with command-line overrides (--set section.key=value).
//
// Every problem is found before any work starts and reported in one cnn::Error, one line per
// problem: "resnet50.ini:12: unknown key 'lrr' in [optim]; did you mean 'lr'?", or
// "resnet50.ini:7: [optim] momentum = 1.5 is outside [0, 1); allowed: a number in [0, 1)".
// Keys that a file leaves out take their defaults. The resolved config (every key) can be written
// back as INI text, which parses to the same config.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cnn::train {

class Config {
 public:
  // The defaults of every key.
  Config();
  // Parses a config file, then applies overrides of the form "section.key=value" in order.
  static Config load(const std::filesystem::path& path, const std::vector<std::string>& overrides = {});
  // Parses INI text; `source` names it in messages (a file name).
  static Config parse(const std::string& text, const std::string& source,
                      const std::vector<std::string>& overrides = {});

  // Applies one "section.key=value" override (a cnn::Error when the key or value is refused).
  void apply_override(const std::string& assignment);

  // Typed access by "section.key"; asking for a key that is not in the schema, or with the wrong
  // type, is a programming error reported as a cnn::Error.
  bool boolean(const std::string& name) const;
  int64_t integer(const std::string& name) const;
  double real(const std::string& name) const;
  // A real key that may be left empty ("not set"): nullopt when empty.
  std::optional<double> optional_real(const std::string& name) const;
  // An integer key that may be left empty: nullopt when empty.
  std::optional<int64_t> optional_integer(const std::string& name) const;
  const std::string& text(const std::string& name) const;  // text, device and choice keys
  std::vector<int64_t> integers(const std::string& name) const;
  std::vector<double> reals(const std::string& name) const;
  std::vector<std::string> texts(const std::string& name) const;

  // Where a key's value came from: "file.ini:12", "--set", or "default".
  const std::string& origin(const std::string& name) const;
  // Whether the value was given (in the file or with --set) rather than left to its default.
  bool given(const std::string& name) const { return origin(name) != "default"; }
  // A key's value as written, whatever its type (for comparing and quoting values).
  const std::string& written(const std::string& name) const;
  // Sets a key to a value checked as a config file's would be, recording `origin` for messages.
  void set(const std::string& name, const std::string& value, const std::string& origin);
  // The file the config was loaded from ("" when parsed from text or built from defaults).
  const std::string& source() const { return source_; }

  // Every section and key of the schema with its resolved value, as INI text.
  std::string to_ini() const;

  bool operator==(const Config& other) const;  // same values (origins aside)

 private:
  struct Value {
    std::string text;
    std::string origin;
  };
  const Value& entry(const std::string& name) const;  // a cnn::Error for a name outside the schema
  const Value& value(const std::string& name, const char* access) const;  // entry(), checked against its type

  std::map<std::string, Value> values_;  // by "section.key"
  std::string source_;
};

}  // namespace cnn::train
