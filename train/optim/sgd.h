// SGD with momentum, Nesterov momentum and L2 weight decay, as torch.optim.SGD (dampening 0):
//   g = grad_scale * grad + wd * p;  buf = momentum * buf + g;  g = nesterov ? g + momentum * buf : buf;
//   p -= lr * g.
#pragma once
#include "train/optim/optimizer.h"

namespace cnn::train {

struct SgdOptions {
  double momentum = 0.9;
  bool nesterov = false;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<ParamGroup> groups, SgdOptions options);

 protected:
  std::vector<std::string> state_names() const override { return {"momentum_buffer"}; }
  int states_used() const override { return options_.momentum != 0 ? 1 : 0; }
  void update(SlotTable& table, const GroupUpdate& u) override;

 private:
  SgdOptions options_;
};

}  // namespace cnn::train
