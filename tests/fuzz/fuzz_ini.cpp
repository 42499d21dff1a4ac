// Feeds the input as the text of an INI config to cnn::train::Config::parse (train/config), the
// reader behind `cnn_train CONFIG`. A refusal (cnn::Error) is success. An accepted config must
// survive the trip its run folder takes: its resolved INI (to_ini, written as config.ini and read
// back by --resume) must parse to the same config. Anything else is a finding.
#include "fuzz_support.h"
#include "train/config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cnn::fuzz::refused_cleanly_or_accepted([&] {
    const std::string text(cnn::fuzz::as_text(data, size));
    const cnn::train::Config config = cnn::train::Config::parse(text, "fuzz.ini");
    const cnn::train::Config again = cnn::train::Config::parse(config.to_ini(), "resolved.ini");
    cnn::fuzz::require(again == config, "a config parses to the same config from its resolved INI text");
  });
  return 0;
}
