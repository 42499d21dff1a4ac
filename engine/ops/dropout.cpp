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
Tensor apply_mask(const Tensor& x, bool per_row, double p, uint64_t seed, uint64_t offset) {
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  const int64_t rows = x.dim() ? x.size(0) : 1, row_size = rows ? x.numel() / rows : 0;
  if (per_row) CNN_KERNEL(x.device(), drop_path, x.dtype(), x.data(), y.data(), rows, row_size, p, seed, offset);
  else CNN_KERNEL(x.device(), dropout, x.dtype(), x.data(), y.data(), x.numel(), p, seed, offset);
  return y;
}

Tensor masked(const char* op, const Tensor& x, bool per_row, double p, uint64_t seed, uint64_t offset) {
  op_checks::floating(op, x);
  CNN_CHECK(p >= 0.0 && p < 1.0, op, ": probability must be in [0, 1), got ", p);
  if (p == 0.0) return x;
  Tensor y = apply_mask(x, per_row, p, seed, offset);
  record_op(op, {x}, {y}, [per_row, p, seed, offset](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    return {apply_mask(g[0], per_row, p, seed, offset)};
  });
  return y;
}
}  // namespace

Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  return masked("dropout", x, false, p, seed, offset);
}

Tensor drop_path(const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  return masked("drop_path", x, true, p, seed, offset);
}

}  // namespace cnn
