// The training step on a GPU never waits for it: forward, backward, unscale (with the inf/nan check),
// clipping and the update run under a HostSyncCheck, which refuses any read back to the host and any
// synchronisation (engine/host_sync_check.h), in fp32, bf16 and fp16 (the loss scaler on the device).
#include <doctest/doctest.h>

#include <sstream>

#include "engine/cnn.h"
#include "train/config/config.h"
#include "train/distributed/data_parallel.h"
#include "train/learner.h"
#include "train/log/console.h"
#include "train/run_log.h"
#include "train/small_run.h"
#include "train/train_settings.h"
#include "train/train_step.h"

using namespace cnn;
using namespace cnn::train;

TEST_CASE("gpu: the training step runs ahead of the device: no host read or synchronisation inside it") {
  for (const char* precision : {"fp32", "bf16", "fp16"}) {
    CAPTURE(precision);
    testing::ScratchDir dir("gpu_step_no_sync");
    const TrainSettings settings =
        from_config(Config::parse(testing::config_text(dir.path, dir.path / "runs"), "test.ini",
                                  {std::string("precision.mode=") + precision, "train.device=cuda", "optim.clip_grad_norm=1.0",
                                   "data.batch_size=8", "model.dropout=0.2"}));
    std::ostringstream quiet;
    Console console(quiet, LogLevel::normal, ProgressMode::lines, false);
    RunLog log(console, {});
    Learner learner = build_learner(settings, 4, log);
    DataParallel single(settings);
    const Tensor images = Tensor::randn({8, 28, 28, 1}, 3, settings.precision.compute, Device::cuda(0));
    const Tensor labels = Tensor::from_vector<int64_t>({0, 1, 2, 3, 3, 2, 1, 0}, {8}).to(Device::cuda(0));
    for (int64_t step = 0; step < 3; ++step) {
      HostSyncCheck check("the training step on the GPU");
      forward_backward(learner, MicroBatch{.images = images, .labels = labels, .epoch = 0, .index = step + 1}, settings);
      optimizer_step(learner, step, settings.optim.clip_grad_norm, {}, single);
    }
    const ScalerReadout after = learner.scaler.read();
    CHECK(after.last_norm > 0);
    CHECK(learner.optimizer->steps_of(learner.model->named_parameters()[0].name) == 3 - after.skipped_steps);
  }
}
