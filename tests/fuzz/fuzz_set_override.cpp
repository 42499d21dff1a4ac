// Feeds the input as command-line overrides (`cnn_train CONFIG --set section.key=value ...`): the
// input split at NUL bytes, as a command line's arguments are, each one handed to
// cnn::train::Config::apply_override (train/config) on the default config. Each refusal
// (cnn::Error) is success; the next override is still applied. The config the accepted overrides
// produce must parse back from its resolved INI text (config.ini in the run folder, which --resume
// reads) to the same config. Anything else is a finding.
#include <string>

#include "fuzz_support.h"
#include "train/config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(cnn::fuzz::as_text(data, size));
  cnn::train::Config config;
  for (size_t begin = 0; begin <= input.size();) {
    size_t end = input.find('\0', begin);
    if (end == std::string::npos) end = input.size();
    cnn::fuzz::refused_cleanly_or_accepted([&] { config.apply_override(input.substr(begin, end - begin)); });
    begin = end + 1;
  }
  cnn::fuzz::refused_cleanly_or_accepted([&] {
    const cnn::train::Config again = cnn::train::Config::parse(config.to_ini(), "resolved.ini");
    cnn::fuzz::require(again == config, "overridden config parses to the same config from its resolved INI text");
  });
  return 0;
}
