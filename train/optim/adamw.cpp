// AdamW: the group's hyper-parameters into AdamWArgs (bias corrections from each tensor's step
// count, on the device), one multi-tensor launch.
#include "train/optim/adamw.h"

#include <cmath>

#include "engine/error.h"

namespace cnn::train {

AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions options) : Optimizer(std::move(groups)), options_(options) {
  CNN_CHECK(options.beta1 >= 0 && options.beta1 < 1 && options.beta2 >= 0 && options.beta2 < 1,
            "AdamW: betas (", options.beta1, ", ", options.beta2, ") must lie in [0, 1)");
  CNN_CHECK(options.eps > 0, "AdamW: eps ", options.eps, " must be positive");
}

void AdamW::update(SlotTable& table, const GroupUpdate& u) {
  // The bias corrections come from each slot's step count, on the device (kernels/optimizer.h).
  auto a = u.kernel_args<kernels::AdamWArgs>();
  a.beta1 = static_cast<float>(options_.beta1);
  a.beta2 = static_cast<float>(options_.beta2);
  a.bias_beta1 = options_.beta1;
  a.bias_beta2 = options_.beta2;
  a.eps = static_cast<float>(options_.eps);
  run_optimizer_kernel(table, a);
}

}  // namespace cnn::train
