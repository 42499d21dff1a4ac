// transpose_last2: swaps the last two axes of a rank-3 tensor with one copy; its gradient is the
// same transpose of the incoming gradient.
#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/ops/op_checks.h"
#include "engine/tape.h"
#include "kernels/regularize.h"

namespace cnn {

Tensor transpose_last2(const Tensor& x) {
  op_checks::defined("transpose_last2", x, "input");
  op_checks::rank("transpose_last2", x, 3, "the input [B, M, N]");
  const int64_t batch = x.size(0), rows = x.size(1), cols = x.size(2);
  Tensor y = Tensor::empty({batch, cols, rows}, x.dtype(), x.device());
  CNN_KERNEL(x.device(), transpose_batched, x.dtype(), x.data(), y.data(), batch, rows, cols);
  if (is_floating(x.dtype()))
    record_op("transpose_last2", {x}, {y},
              [](const std::vector<Tensor>& g) -> std::vector<Tensor> { return {transpose_last2(g[0])}; });
  return y;
}

}  // namespace cnn
