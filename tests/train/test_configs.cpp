// Every example config in configs/ parses and validates against the schema, names a known model,
// and the default (fashion_mnist.ini) points at the Debian Fashion-MNIST folder on the CPU.
#include <doctest/doctest.h>

#include <filesystem>

#include "layers/registry.h"
#include "train/config/config.h"

using namespace cnn;

TEST_CASE("example configs parse, validate and name models of the zoo") {
  const std::filesystem::path dir = std::filesystem::path(CNN_SOURCE_DIR) / "configs";
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".ini") continue;
    INFO(entry.path().string());
    const train::Config c = train::Config::load(entry.path());
    CHECK_NOTHROW(model_info(c.text("model.name")));
    ++count;
  }
  CHECK(count >= 6);
  const train::Config d = train::Config::load(dir / "fashion_mnist.ini");
  CHECK(d.text("train.device") == "cpu");
  CHECK(d.text("data.path") == "/usr/share/datasets/fashion-mnist");
}
