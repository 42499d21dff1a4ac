// Dropout and StochasticDepth (see dropout.h).
#include "layers/dropout.h"

#include "engine/ops.h"

namespace cnn {

RandomDrop::RandomDrop(std::string type_name, double p, bool per_sample)
    : Module(std::move(type_name)), p_(p), per_sample_(per_sample) {
  CNN_CHECK(p >= 0.0 && p < 1.0, this->type_name(), "(p = ", p, "): the drop probability must be in [0, 1)");
}

Tensor RandomDrop::compute(const Tensor& x) {
  if (!training() || p_ == 0.0) return x;
  // The ops draw element (or sample) i from (seed, offset + i): each call takes fresh offsets.
  if (per_sample_)
    return drop_path(x, p_, random_seed(), take_random_offset(static_cast<uint64_t>(x.size(0))), random_seed_from());
  return dropout(x, p_, random_seed(), take_random_offset(static_cast<uint64_t>(x.numel())), random_seed_from());
}

Shape RandomDrop::infer_shape(const Shape& input, ShapeTrace&) const { return input; }

Dropout::Dropout(double p) : RandomDrop("Dropout", p, /*per_sample=*/false) {}

StochasticDepth::StochasticDepth(double p) : RandomDrop("StochasticDepth", p, /*per_sample=*/true) {}

}  // namespace cnn
