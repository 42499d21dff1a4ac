// Mean cross-entropy over the rows of logits [N, K], fused with log-softmax: the forward keeps the
// log-probabilities (in f32, f64 for f64 logits) and the backward is (softmax - q) * dloss / N,
// where q is the target distribution (one-hot with label smoothing, or given soft targets).
#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/ops/middle_sum.h"
#include "engine/ops/op_checks.h"
#include "engine/tape.h"
#include "kernels/reduce.h"
#include "kernels/softmax.h"

namespace cnn {

namespace {
// labels and soft are kept alive by the caller for as long as the kernels use them.
Tensor cross_entropy_impl(const char* op, const Tensor& logits, const Tensor& labels, const Tensor& soft,
                          double smoothing) {
  op_checks::floating(op, logits);
  op_checks::rank(op, logits, 2, "the logits [N, K]");
  const int64_t rows = logits.size(0), cols = logits.size(1);
  const DType acc = accumulate_dtype(logits.dtype());
  kernels::CrossEntropyTargets targets;
  targets.smoothing = smoothing;
  if (labels.defined()) {
    CNN_CHECK(labels.dtype() == DType::i64 && labels.dim() == 1 && labels.size(0) == rows, op,
              ": labels must be i64 [", rows, "] for logits ", describe(logits), ", got ", describe(labels));
    CNN_CHECK(labels.device() == logits.device(), op, ": labels ", describe(labels), " and logits ",
              describe(logits), " are on different devices");
    CNN_CHECK(smoothing >= 0.0 && smoothing < 1.0, op, ": label_smoothing must be in [0, 1), got ", smoothing);
    // The labels' range is checked by the CPU kernel when it runs (also at a replay of a captured
    // step, whose labels are not known at the capture); a CUDA kernel cannot report it.
    targets.labels = labels.data_as<int64_t>();
  } else {
    CNN_CHECK(soft.shape() == logits.shape() && soft.dtype() == acc && soft.device() == logits.device(), op,
              ": soft targets must be ", dtype_name(acc), " ", logits.shape().str(), " on ", logits.device().str(),
              ", got ", describe(soft));
    targets.soft = soft.data();
  }

  Tensor logp = Tensor::empty(logits.shape(), acc, logits.device());
  Tensor row_loss = Tensor::empty({rows}, acc, logits.device());
  CNN_KERNEL(logits.device(), cross_entropy_forward, logits.dtype(), logits.data(), targets, logp.data(), row_loss.data(),
             rows, cols);
  Tensor loss = Tensor::empty({}, acc, logits.device());
  const double inv_rows = rows ? 1.0 / static_cast<double>(rows) : 0.0;
  middle_sum(row_loss, loss, 1, rows, 1, inv_rows);

  const DType dt = logits.dtype();
  record_op(op, {logits}, {loss},
            [logp, labels, soft, targets, dt, rows, cols, inv_rows](const std::vector<Tensor>& g) -> std::vector<Tensor> {
              Tensor glogits = Tensor::empty({rows, cols}, dt, logp.device());
              const Tensor gloss = g[0].to(logp.dtype());
              CNN_KERNEL(logp.device(), cross_entropy_backward, dt, logp.data(), targets, gloss.data(), inv_rows,
                         glogits.data(), rows, cols);
              return {glogits};
            });
  return loss;
}
}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& labels, double label_smoothing) {
  op_checks::defined("cross_entropy", labels, "labels");
  return cross_entropy_impl("cross_entropy", logits, labels, Tensor(), label_smoothing);
}

Tensor cross_entropy_soft(const Tensor& logits, const Tensor& target_probs) {
  op_checks::defined("cross_entropy_soft", target_probs, "target_probs");
  return cross_entropy_impl("cross_entropy_soft", logits, Tensor(), target_probs, 0.0);
}

}  // namespace cnn
