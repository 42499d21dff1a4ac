// softmax and log_softmax over the last axis (max-shifted, so large logits do not overflow).
// The backward uses only the saved output y.
#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/ops/op_checks.h"
#include "engine/tape.h"
#include "kernels/softmax.h"

namespace cnn {

namespace {
Tensor softmax_impl(const char* op, const Tensor& x, bool log) {
  op_checks::floating(op, x);
  CNN_CHECK(x.dim() >= 1 && x.size(-1) > 0, op, ": needs a non-empty last axis, got ", describe(x));
  const int64_t cols = x.size(-1), rows = x.numel() / cols;
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  CNN_KERNEL(x.device(), softmax_forward, x.dtype(), x.data(), y.data(), rows, cols, log);
  // The rule keeps a detached handle to y: capturing y itself would keep its autograd identity alive.
  const Tensor saved = y.detach();
  record_op(op, {x}, {y}, [saved, rows, cols, log](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    Tensor gx = Tensor::empty(saved.shape(), saved.dtype(), saved.device());
    const Tensor& gy = g[0];
    CNN_KERNEL(gy.device(), softmax_backward, gy.dtype(), saved.data(), gy.data(), gx.data(), rows, cols, log);
    return {gx};
  });
  return y;
}
}  // namespace

Tensor softmax(const Tensor& x) { return softmax_impl("softmax", x, false); }
Tensor log_softmax(const Tensor& x) { return softmax_impl("log_softmax", x, true); }

}  // namespace cnn
