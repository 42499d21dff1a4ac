// Dropout and StochasticDepth (drop path) modules. Both are the identity in eval mode. Their masks
// come from the module's random stream (seeded by Module::initialize/reseed) with a fresh offset per
// call, so runs with one seed draw the same masks, and a checkpointed block replays its own.
#pragma once
#include "engine/tensor.h"
#include "layers/module.h"

namespace cnn {

// What the two share: a drop probability, identity in eval mode and for p = 0, and the draws from
// the module's stream (one per element for dropout, one per sample for drop path).
class RandomDrop : public Module {
 public:
  double p() const { return p_; }
  Shape infer_shape(const Shape& input, ShapeTrace& trace) const override;

 protected:
  RandomDrop(std::string type_name, double p, bool per_sample);
  Tensor compute(const Tensor& x) override;

 private:
  double p_;
  bool per_sample_;
};

// Zeroes each element with probability p and scales the survivors by 1 / (1 - p).
class Dropout : public RandomDrop {
 public:
  explicit Dropout(double p);
};

// torchvision's StochasticDepth in "row" mode: zeroes whole samples (first axis) with probability p
// and scales the survivors by 1 / (1 - p); used on the residual branch of MBConv blocks.
class StochasticDepth : public RandomDrop {
 public:
  explicit StochasticDepth(double p);
};

}  // namespace cnn
