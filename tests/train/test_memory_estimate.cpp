// The training step's memory estimate (train/memory_estimate.h): the sum it makes over a model's
// layers, the refusal with a batch size that fits, the warning near the limit, and cnn_train refusing
// a batch far beyond any machine's memory before its first step, leaving no run folder behind.
#include <doctest/doctest.h>

#include <filesystem>

#include "layers/activation.h"
#include "layers/conv2d.h"
#include "layers/sequential.h"
#include "train/config/config.h"
#include "train/memory_estimate.h"
#include "train/small_run.h"
#include "train/validation.h"
#include "error_message.h"

using namespace cnn;
using namespace cnn::train;
using cnn::testing::error_message;

TEST_CASE("memory estimate: every layer's output per image, parameters with gradients and optimizer state, input batches") {
  Sequential model;
  model.push_back(std::make_unique<Conv2d>(1, 2, 3));  // "same" padding: 4x4x2 out, 18 weights
  model.push_back(std::make_unique<Activation>(ActivationKind::relu));  // 4x4x2 out
  model.initialize(1);
  const MemoryEstimate e = estimate_step_memory(model, Shape{10, 4, 4, 1}, DType::f32, 1, 3);
  CHECK(e.per_image == (32 + 32) * 4);
  CHECK(e.activations == 10 * e.per_image);
  CHECK(e.parameters == 18 * 4 * 3);      // weights, gradients, momentum
  CHECK(e.batches == 10 * 16 * 4 * 3);    // three f32 input batches of 10 4x4x1 images
  CHECK(e.total() == e.activations + e.parameters + e.batches);
  // Half-precision activations take half the bytes; AdamW keeps two states.
  const MemoryEstimate half = estimate_step_memory(model, Shape{10, 4, 4, 1}, DType::f16, 2, 3);
  CHECK(half.per_image == e.per_image / 2);
  CHECK(half.parameters == 18 * 4 * 4);
}

TEST_CASE("memory estimate: validation's counts, with the confusion matrix only up to its class bound") {
  // Counts and their f64 copy for the all-reduce: the matrix and two per-class vectors.
  CHECK(validation_record_bytes(10) == (100 + 20) * 8 * 2);
  CHECK(validation_record_bytes(kConfusionMatrixMaxClasses) ==
        static_cast<uint64_t>(kConfusionMatrixMaxClasses * kConfusionMatrixMaxClasses + 2 * kConfusionMatrixMaxClasses) * 16);
  CHECK(validation_record_bytes(21843) == 2 * 21843 * 16);  // ImageNet-21k: per-class counts only
  MemoryEstimate e;
  e.validation = 5;
  CHECK(e.total() == 5);
}

TEST_CASE("memory check: refused beyond the memory there is, with a batch size that fits, warned above 80%") {
  MemoryEstimate e;
  e.per_image = 1 << 20;  // 1 MiB
  e.activations = 1000ull << 20;
  e.parameters = 100ull << 20;
  e.batches = 0;
  const AvailableMemory small{500ull << 20, "available on this machine"};
  const std::string refused = error_message([&] { check_step_memory(e, small, 1000, "run.ini:7"); });
  CHECK(refused.find("needs about 1.1 GiB") != std::string::npos);
  CHECK(refused.find("1.0 MiB per image x 1000") != std::string::npos);
  CHECK(refused.find("500.0 MiB is available on this machine") != std::string::npos);
  CHECK(refused.find("at most about 320 (data.batch_size, from run.ini:7)") != std::string::npos);  // 80% of 400 MiB
  CHECK(check_step_memory(e, AvailableMemory{1300ull << 20, "x"}, 1000, "run.ini:7").find("more than 80%") != std::string::npos);
  CHECK(check_step_memory(e, AvailableMemory{4000ull << 20, "x"}, 1000, "run.ini:7").empty());
  e.parameters = 600ull << 20;
  CHECK(error_message([&] { check_step_memory(e, small, 1000, "run.ini:7"); }).find("parameters alone do not fit") !=
        std::string::npos);
}

TEST_CASE("memory check: this machine's available memory is read and plausible") {
  const std::optional<AvailableMemory> m = available_memory(Device::cpu());
  REQUIRE(m.has_value());
  CHECK(m->bytes > (64ull << 20));
  CHECK(m->bytes < (1ull << 50));
}

TEST_CASE("trainer: a batch far beyond the memory is refused before the first step, and the new run folder is removed") {
  // 4096x4096 crops: several GiB of activations per image, hundreds of GiB for the batch of 32.
  // Before, the run started (and the system killed it); a refused run also left its folder behind.
  cnn::train::testing::SmallRun run("memory_refusal", 64, 16, 1, 2);
  const Config config = Config::parse(run.text, "test.ini", {"data.image_size=4096", "augment.random_resized_crop=false"});
  const std::string message = error_message([&] { run_training(config, run.opts); });
  CHECK(message.find("the training step needs about") != std::string::npos);
  CHECK(message.find("use a batch size of at most about") != std::string::npos);
  const std::filesystem::path runs = run.dir.path / "runs";
  CHECK((!std::filesystem::exists(runs) || std::filesystem::is_empty(runs)));
  // Another refusal before training (accumulate beyond the epoch) leaves no folder either.
  CHECK_THROWS_AS(run_training(Config::parse(run.text, "test.ini", {"train.accumulate=100"}), run.opts), Error);
  CHECK((!std::filesystem::exists(runs) || std::filesystem::is_empty(runs)));
}
