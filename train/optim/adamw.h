// AdamW, as torch.optim.AdamW: decoupled weight decay and bias-corrected moments, per parameter
// step counts (a parameter unfrozen later starts its own bias correction from step 1):
//   p *= 1 - lr * wd;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
#pragma once
#include "train/optim/optimizer.h"

namespace cnn::train {

struct AdamWOptions {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
};

class AdamW : public Optimizer {
 public:
  AdamW(std::vector<ParamGroup> groups, AdamWOptions options);

 protected:
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  int states_used() const override { return 2; }
  void update(SlotTable& table, const GroupUpdate& u) override;

 private:
  AdamWOptions options_;
};

}  // namespace cnn::train
