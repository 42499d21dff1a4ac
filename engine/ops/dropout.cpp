// dropout and drop_path (stochastic depth). Masks are recomputed from (seed, offset) in the
// backward pass instead of being stored: the same Philox draws give the same mask.
#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/ops/op_checks.h"
#include "engine/tape.h"
#include "kernels/regularize.h"

namespace cnn {

namespace {
// Applies the mask of (p, seed, offset) to x: dropout per element, or drop-path per first-axis row.
Tensor apply_mask(const Tensor& x, bool per_row, double p, uint64_t salt, const Tensor& seed_from, uint64_t offset) {
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  const MaskSeed seed(salt, seed_from.defined() ? static_cast<const uint64_t*>(seed_from.data()) : nullptr);
  const int64_t rows = x.dim() ? x.size(0) : 1, row_size = rows ? x.numel() / rows : 0;
  if (per_row) CNN_KERNEL(x.device(), drop_path, x.dtype(), x.data(), y.data(), rows, row_size, p, seed, offset);
  else CNN_KERNEL(x.device(), dropout, x.dtype(), x.data(), y.data(), x.numel(), p, seed, offset);
  return y;
}

Tensor masked(const char* op, const Tensor& x, bool per_row, double p, uint64_t seed, uint64_t offset,
              const Tensor& seed_from) {
  op_checks::floating(op, x);
  CNN_CHECK(p >= 0.0 && p < 1.0, op, ": probability must be in [0, 1), got ", p);
  CNN_CHECK(!seed_from.defined() || (seed_from.dtype() == DType::i64 && seed_from.numel() == 1 &&
                                     seed_from.device() == x.device()),
            op, ": the seed on the device must be one i64 on ", x.device().str(), ", got ", describe(seed_from));
  if (p == 0.0) return x;
  Tensor y = apply_mask(x, per_row, p, seed, seed_from, offset);
  record_op(op, {x}, {y}, [per_row, p, seed, seed_from, offset](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    return {apply_mask(g[0], per_row, p, seed, seed_from, offset)};
  });
  return y;
}
}  // namespace

Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset, const Tensor& seed_from) {
  return masked("dropout", x, false, p, seed, offset, seed_from);
}

Tensor drop_path(const Tensor& x, double p, uint64_t seed, uint64_t offset, const Tensor& seed_from) {
  return masked("drop_path", x, true, p, seed, offset, seed_from);
}

}  // namespace cnn
