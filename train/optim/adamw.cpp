// AdamW: per-tensor bias corrections into the slots, the group's hyper-parameters into AdamWArgs,
// one multi-tensor launch.
#include "train/optim/adamw.h"

#include <cmath>

#include "engine/error.h"

namespace cnn::train {

AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions options) : Optimizer(std::move(groups)), options_(options) {
  CNN_CHECK(options.beta1 >= 0 && options.beta1 < 1 && options.beta2 >= 0 && options.beta2 < 1,
            "AdamW: betas (", options.beta1, ", ", options.beta2, ") must lie in [0, 1)");
  CNN_CHECK(options.eps > 0, "AdamW: eps ", options.eps, " must be positive");
}

void AdamW::update(SlotTable& table, const std::vector<int64_t>& steps, const GroupUpdate& u) {
  for (size_t i = 0; i < table.slots.size(); ++i) {
    const double t = static_cast<double>(steps[i]);
    table.slots[i].bias_correction1 = static_cast<float>(1.0 - std::pow(options_.beta1, t));
    table.slots[i].bias_correction2 = static_cast<float>(1.0 - std::pow(options_.beta2, t));
  }
  auto a = u.kernel_args<kernels::AdamWArgs>();
  a.beta1 = static_cast<float>(options_.beta1);
  a.beta2 = static_cast<float>(options_.beta2);
  a.eps = static_cast<float>(options_.eps);
  run_optimizer_kernel(table, a);
}

}  // namespace cnn::train
