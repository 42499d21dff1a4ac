// SGD: the group's hyper-parameters into SgdArgs, one multi-tensor launch.
#include "train/optim/sgd.h"

#include "engine/error.h"

namespace cnn::train {

SGD::SGD(std::vector<ParamGroup> groups, SgdOptions options) : Optimizer(std::move(groups)), options_(options) {
  CNN_CHECK(options.momentum >= 0 && options.momentum < 1, "SGD: momentum ", options.momentum, " is outside [0, 1)");
  CNN_CHECK(!options.nesterov || options.momentum > 0, "SGD: Nesterov momentum needs a momentum > 0");
}

void SGD::update(SlotTable& table, const GroupUpdate& u) {
  auto a = u.kernel_args<kernels::SgdArgs>();
  a.momentum = static_cast<float>(options_.momentum);
  a.nesterov = options_.nesterov;
  run_optimizer_kernel(table, a);
}

}  // namespace cnn::train
