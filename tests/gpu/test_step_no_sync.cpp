// The training step on a GPU never waits for it: forward, backward, unscale (with the inf/nan check),
// clipping and the update run under a HostSyncCheck, which refuses any read back to the host and any
// synchronisation (engine/host_sync_check.h), in fp32, bf16 and fp16 (the loss scaler on the device).
#include <doctest/doctest.h>

#include <string>

#include "train/small_run.h"

TEST_CASE("gpu: the training step runs ahead of the device: no host read or synchronisation inside it") {
  for (const char* precision : {"fp32", "bf16", "fp16"}) {
    CAPTURE(precision);
    cnn::train::testing::check_steps_never_wait_for_the_device({std::string("precision.mode=") + precision, "train.device=cuda",
                                                                "optim.clip_grad_norm=1.0", "data.batch_size=8",
                                                                "model.dropout=0.2"});
  }
}
