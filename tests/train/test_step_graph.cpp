// [train] cuda_graphs (train/step_graph.h), run on the CPU, where the captured step is replayed as
// its recorded kernel calls, with CUDA graphs' rules: nothing the host computed during the capture
// changes at a replay. So a run with graphs must train bit for bit as the eager run: any per-step
// value left on the host (a learning rate, a count, a dropout seed) would be frozen at its capture-time
// value and make the runs differ. Also: the runs that cannot be captured say why and train eagerly,
// a batch of other shapes runs eagerly, replaced tensors are captured again, a failed capture falls
// back to eager steps.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/cnn.h"
#include "train/config/config.h"
#include "train/distributed/data_parallel.h"
#include "train/learner.h"
#include "train/log/console.h"
#include "train/run_log.h"
#include "train/small_run.h"
#include "train/step_graph.h"
#include "train/train_settings.h"
#include "train/trainer.h"

using namespace cnn;
using namespace cnn::train;
using namespace cnn::train::testing;


TEST_CASE("cuda_graphs: the replayed step trains bit for bit as the eager step (warm-up cosine, dropout, BatchNorm counts)") {
  // 136 images: 4 batches of 32 and a last one of 8 per epoch.
  SmallRun run("graph_sgd", 136, 64, 1, 2);
  const std::string log = check_graphs_train_as_eager(run, {});
  CHECK(log.find("captured the training step at step 4 (") != std::string::npos);
  CHECK(log.find("again") == std::string::npos);  // one capture for the run
}

TEST_CASE("cuda_graphs: AdamW with a head learning-rate multiplier, clipping, and fp16 loss scaling replay bit for bit") {
  SmallRun run("graph_adamw", 136, 64, 3, 4);
  check_graphs_train_as_eager(run, {"optim.name=adamw", "optim.lr=0.003", "optim.head_lr_mult=3", "optim.clip_grad_norm=0.5",
                                    "precision.mode=fp16", "precision.init_scale=65536", "precision.growth_interval=2"});
}

TEST_CASE("cuda_graphs: bf16 with cached low-precision weights and EMA replay bit for bit") {
  SmallRun run("graph_bf16", 136, 64, 5, 6);
  check_graphs_train_as_eager(run, {"precision.mode=bf16", "ema.decay=0.9"});
}

TEST_CASE("cuda_graphs: EfficientNet-B0 with drop path and gradient checkpointing replays bit for bit") {
  SmallRun run("graph_effnet", 72, 32, 11, 12);
  const std::string log = check_graphs_train_as_eager(
      run, {"model.name=efficientnet_b0", "model.drop_path=0.3", "train.checkpointing=blocks", "optim.head=classifier",
            "data.batch_size=16"});
  CHECK(log.find("captured the training step at step 4 (") != std::string::npos);
}

TEST_CASE("cuda_graphs: SWA's learning rate and average, and a plateau schedule, replay bit for bit") {
  SmallRun swa("graph_swa", 136, 64, 13, 14);
  check_graphs_train_as_eager(swa, {"train.epochs=3", "swa.start_epoch=1", "swa.lr=0.01", "swa.anneal_epochs=1"});
  SmallRun plateau("graph_plateau", 136, 64, 13, 14);
  const std::string log = check_graphs_train_as_eager(
      plateau, {"train.epochs=3", "schedule.name=plateau", "schedule.patience=0", "schedule.gamma=0.5",
                "schedule.plateau_metric=val_top1"});
  CHECK(log.find("lr 0.01 ") != std::string::npos);  // the plateau halved the rate for epoch 3, between replays
}

TEST_CASE("cuda_graphs: unfreezing parameters mid-run captures the step again") {
  SmallRun run("graph_freeze", 136, 64, 7, 8);
  const std::string log = check_graphs_train_as_eager(run, {"optim.freeze=features.0", "optim.unfreeze_epoch=1"});
  CHECK(log.find("captured the training step at step 4 (") != std::string::npos);
  CHECK(log.find("again: the model's or the optimizer's tensors were replaced") != std::string::npos);
}

TEST_CASE("cuda_graphs: a run whose step cannot be captured says why and trains eagerly") {
  SmallRun run("graph_obstacles", 72, 32, 9, 10);
  const std::pair<const char*, const char*> cases[] = {
      {"train.accumulate=2", "gradient accumulation ([train] accumulate = 2)"},
      {"train.mixup=0.2", "MixUp and CutMix draw each batch's mixing on the host"},
  };
  int index = 0;
  for (const auto& [setting, reason] : cases) {
    INFO(std::string(setting));
    const std::string name = "run.name=obstacle" + std::to_string(index++);
    const TrainSummary s = run_training(
        Config::parse(run.text, "test.ini", {setting, "train.cuda_graphs=true", "train.epochs=1", name}),
        run.opts);
    const std::string log = read_text_file(s.run_dir / "train.log");
    INFO(log);
    CHECK(log.find(std::string("the training step cannot be captured, it runs eagerly: ") + reason) != std::string::npos);
    CHECK(log.find("captured the training step") == std::string::npos);
    CHECK(s.steps > 0);
  }
}

TEST_CASE("cuda_graphs: a capture that would create the optimizer's state is refused and leaves no gradient behind") {
  // An optimizer makes its state at a parameter's first step: captured, the zero-fill of the
  // momentum would run again at every replay. The warm-up's eager steps come first for this.
  ScratchDir dir("graph_refused");
  const TrainSettings settings = from_config(Config::parse(config_text(dir.path, dir.path / "runs"), "test.ini", {}));
  std::ostringstream quiet;
  Console console(quiet, LogLevel::normal, ProgressMode::lines, false);
  RunLog log(console, {});
  Learner learner = build_learner(settings, 4, log);
  DataParallel single(settings);
  StepGraph graph(learner, settings, single);
  const MicroBatch batch{.images = Tensor::randn({8, 28, 28, 1}, 3),
                         .labels = Tensor::from_vector<int64_t>({0, 1, 2, 3, 3, 2, 1, 0}, {8}),
                         .epoch = 0,
                         .index = 1};
  CHECK_THROWS_WITH_AS(graph.prepare(batch, 0),
                       doctest::Contains("created or replaced tensors of the model or the optimizer during its capture"),
                       Error);
  for (const auto& p : learner.model->named_parameters()) CHECK_FALSE(p.tensor.grad().defined());
  CHECK(graph.captures() == 0);
  // After an eager step the capture works, and a replay is that step.
  forward_backward(learner, batch, settings);
  optimizer_step(learner, 0, 0.0, {}, single);
  graph.prepare(batch, 1);
  CHECK(graph.captures() == 1);
  const Tensor loss = graph.replay(batch, 1);
  CHECK(std::isfinite(loss.item()));
  CHECK(learner.optimizer->steps_of(learner.model->named_parameters()[0].name) == 2);
}
