// Training checkpoints (train/checkpoint.h): a full training state round trip (parameters, buffers,
// real optimizer state, schedule and scaler state, config text, class names), refusal of files that
// are not checkpoints, atomic replacement, and the last/best/resume naming rules.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>

#include "data/array_dataset.h"
#include "data/packed_dataset.h"
#include "engine/cnn.h"
#include "engine/io/atomic_file.h"
#include "engine/io/hdf5.h"
#include "engine/test_io_support.h"
#include "train/checkpoint.h"
#include "train/config/config.h"
#include "train/optim/sgd.h"

using namespace cnn;
using namespace cnn::train;

namespace {
TrainingState sample_state() {
  Tensor w = Tensor::randn({4, 3}, 1);
  w.requires_grad_();
  w.set_grad(Tensor::randn({4, 3}, 2));
  SGD sgd(make_param_groups({{"fc.weight", w}}, {}), {0.9, true});
  sgd.step(0.1);
  TrainingState s;
  s.params = {{"fc.weight", w}, {"fc.bias", Tensor::zeros({4})}};
  s.buffers = {{"bn1.running_mean", Tensor::randn({3}, 3)}, {"bn1.num_batches_tracked", Tensor::ones({}, DType::i64)}};
  s.optimizer = sgd.state();
  s.epoch = 7;
  s.step = 7000;
  s.seed = 0xDEADBEEFCAFEull;
  s.best_metric = 0.7531;
  s.lr_schedule = {0.1, 0.98, 2, 0};
  s.loss_scaler = {32768, 17, 2};
  s.config = Config::parse("[train]\nepochs = 90\n", "r.ini").to_ini();
  s.class_names = {"tench", "goldfish", "great white shark"};
  return s;
}

bool same_tensors(const io::NamedTensors& a, const io::NamedTensors& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].first != b[i].first || a[i].second.to_doubles() != b[i].second.to_doubles()) return false;
  return true;
}
}  // namespace

TEST_CASE("checkpoint: a training state round-trips, and the config in it parses back") {
  const io_test::ScratchDir dir("checkpoint");
  const TrainingState saved = sample_state();
  save_checkpoint(last_checkpoint_path(dir), saved);
  const TrainingState loaded = load_checkpoint(dir / "last.h5");
  CHECK(same_tensors(loaded.params, saved.params));
  CHECK(same_tensors(loaded.buffers, saved.buffers));
  CHECK(same_tensors(loaded.optimizer, saved.optimizer));
  CHECK(loaded.optimizer.size() == 2);  // fc.weight.step and fc.weight.momentum_buffer
  CHECK(loaded.epoch == 7);
  CHECK(loaded.step == 7000);
  CHECK(loaded.seed == 0xDEADBEEFCAFEull);
  CHECK(loaded.best_metric == 0.7531);
  CHECK(loaded.lr_schedule == saved.lr_schedule);
  CHECK(loaded.loss_scaler == saved.loss_scaler);
  CHECK(loaded.class_names == saved.class_names);
  CHECK(Config::parse(loaded.config, "checkpoint") == Config::parse("[train]\nepochs = 90\n", "r.ini"));

  TrainingState fresh;  // nothing yet: empty lists and NaN best metric survive too
  save_checkpoint(dir / "fresh.h5", fresh);
  const TrainingState back = load_checkpoint(dir / "fresh.h5");
  CHECK(std::isnan(back.best_metric));
  CHECK(back.lr_schedule.empty());
  CHECK(back.class_names.empty());
}

TEST_CASE("checkpoint: files that are not checkpoints are refused, a failed save keeps the old one") {
  const io_test::ScratchDir dir("checkpoint_errors");
  io::TensorFile weights;
  weights.tensors.emplace_back("fc.weight", Tensor::zeros({2, 2}));
  io::save_hdf5(dir / "weights.h5", weights);
  CHECK_THROWS_WITH_AS(load_checkpoint(dir / "weights.h5"), doctest::Contains("is not a training checkpoint"), Error);
  CHECK_THROWS_WITH_AS(load_checkpoint(dir / "none.h5"), doctest::Contains("none.h5' does not exist"), Error);

  save_checkpoint(dir / "last.h5", sample_state());
  TrainingState broken = sample_state();
  broken.epoch = 8;
  broken.buffers.emplace_back("undefined", Tensor());
  CHECK_THROWS_AS(save_checkpoint(dir / "last.h5", broken), Error);
  CHECK(load_checkpoint(dir / "last.h5").epoch == 7);
  CHECK_FALSE(std::filesystem::exists(io::temporary_path(dir / "last.h5")));
}

TEST_CASE("checkpoint naming: last.h5 and best.h5") {
  CHECK(last_checkpoint_path("runs/r50") == std::filesystem::path("runs/r50/last.h5"));
  CHECK(best_checkpoint_path("runs/r50") == std::filesystem::path("runs/r50/best.h5"));
}

// cnn_infer --checkpoint packed.h5 answered with an HDF5 element type no tensor holds.
TEST_CASE("checkpoint: a packed dataset given as a checkpoint is named as one") {
  const io_test::ScratchDir dir("checkpoint_packed");
  const auto images = Tensor::zeros({3, 4, 4, 1}, DType::u8);
  const data::ArrayDataset array(images, {0, 1, 1}, {"a", "b"}, "tiny");
  data::PackOptions quiet;
  quiet.log = [](const std::string&) {};
  const std::string packed = (dir / "packed.h5").string();
  REQUIRE(data::pack_dataset(array, packed, quiet).written == 3);
  CHECK_THROWS_WITH_AS(load_checkpoint(packed), doctest::Contains("is a dataset packed by cnn_pack, not a checkpoint"), Error);
}
