// Reductions. sum/mean over any set of axes reduce one run of adjacent axes at a time, each as the
// [outer, mid, inner] middle reduction of kernels/reduce.h; the backward broadcasts the gradient
// back run by run. max_last returns values and first-occurrence indices over the last axis.
#include <algorithm>

#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/ops/middle_sum.h"
#include "engine/ops/kernel_workspace.h"
#include "engine/ops/op_checks.h"
#include "engine/tape.h"
#include "kernels/reduce.h"

namespace cnn {

void middle_sum(const Tensor& in, Tensor& out, int64_t outer, int64_t mid, int64_t inner, double scale) {
  size_t bytes = 0;
  if (!in.device().is_cpu()) CNN_IF_CUDA(bytes = kernels::cuda::reduce_middle_sum_workspace_bytes(in.dtype(), outer, mid, inner));
  Tensor workspace;
  CNN_KERNEL(in.device(), reduce_middle_sum, in.dtype(), in.data(), out.data(), outer, mid, inner, scale,
             kernel_workspace(bytes, in.device(), workspace));
}

namespace {
struct AxisRun {
  int first, last;  // inclusive
};

std::vector<AxisRun> axis_runs(const char* op, const Tensor& x, std::vector<int> axes) {
  const int rank = x.dim();
  for (int& a : axes) {
    const int original = a;
    if (a < 0) a += rank;
    CNN_CHECK(a >= 0 && a < rank, op, ": axis ", original, " out of range for ", describe(x));
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  std::vector<AxisRun> runs;
  for (int a : axes) {
    if (!runs.empty() && runs.back().last + 1 == a) runs.back().last = a;
    else runs.push_back({a, a});
  }
  return runs;
}

int64_t product(const Shape& s, int first, int last) {
  int64_t p = 1;
  for (int i = first; i <= last; ++i) p *= s[i];
  return p;
}

void middle_expand(const Tensor& in, Tensor& out, int64_t outer, int64_t mid, int64_t inner, double scale) {
  CNN_KERNEL(in.device(), expand_middle, in.dtype(), in.data(), out.data(), outer, mid, inner, scale);
}

// The shape with the axes of `runs` set to 1.
Shape keepdim_shape(const Shape& s, const std::vector<AxisRun>& runs) {
  Shape k = s;
  for (const AxisRun& r : runs)
    for (int a = r.first; a <= r.last; ++a) k[a] = 1;
  return k;
}

Shape drop_axes(const Shape& s, const std::vector<AxisRun>& runs) {
  std::vector<int64_t> dims;
  for (int a = 0; a < s.rank(); ++a) {
    bool reduced = false;
    for (const AxisRun& r : runs) reduced = reduced || (a >= r.first && a <= r.last);
    if (!reduced) dims.push_back(s[a]);
  }
  return Shape(dims);
}

Tensor reduce_sum(const char* op, const Tensor& x, const std::vector<int>& axes, bool keepdim, bool average) {
  op_checks::floating(op, x);
  const std::vector<AxisRun> runs = axis_runs(op, x, axes);
  const Shape in_shape = x.shape();
  const Shape kept = keepdim_shape(in_shape, runs);
  const double count = static_cast<double>(x.numel()) / static_cast<double>(std::max<int64_t>(kept.numel(), 1));
  const double scale = average ? 1.0 / std::max(count, 1.0) : 1.0;

  // Reduce the last run first so that the axis numbers of earlier runs stay valid.
  Tensor current = x.detach();
  Shape current_shape = in_shape;
  for (auto r = runs.rbegin(); r != runs.rend(); ++r) {
    const int64_t outer = product(current_shape, 0, r->first - 1), mid = product(current_shape, r->first, r->last),
                  inner = product(current_shape, r->last + 1, current_shape.rank() - 1);
    Shape next_shape = current_shape;
    for (int a = r->first; a <= r->last; ++a) next_shape[a] = 1;
    Tensor next = Tensor::empty(next_shape, x.dtype(), x.device());
    middle_sum(current, next, outer, mid, inner, r == runs.rbegin() ? scale : 1.0);
    current = next;
    current_shape = next_shape;
  }
  if (runs.empty() && scale != 1.0) current = affine(current, scale, 0.0).detach();
  Tensor y = current.reshape(keepdim ? kept : drop_axes(in_shape, runs));

  record_op(op, {x}, {y}, [runs, in_shape, kept, scale](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    Tensor grad = g[0].reshape(kept);
    Shape shape = kept;
    bool scaled = false;
    for (const AxisRun& r : runs) {
      const int64_t outer = product(shape, 0, r.first - 1), mid = product(in_shape, r.first, r.last),
                    inner = product(shape, r.last + 1, shape.rank() - 1);
      for (int a = r.first; a <= r.last; ++a) shape[a] = in_shape[a];
      Tensor next = Tensor::empty(shape, grad.dtype(), grad.device());
      middle_expand(grad, next, outer, mid, inner, scaled ? 1.0 : scale);
      scaled = true;
      grad = next;
    }
    if (!scaled && scale != 1.0) grad = affine(grad, scale, 0.0);
    return {grad};
  });
  return y;
}

std::vector<int> all_axes(const Tensor& x) {
  std::vector<int> axes(static_cast<size_t>(x.dim()));
  for (int i = 0; i < x.dim(); ++i) axes[static_cast<size_t>(i)] = i;
  return axes;
}
}  // namespace

Tensor sum(const Tensor& x) { return reduce_sum("sum", x, all_axes(x), false, false); }
Tensor mean(const Tensor& x) { return reduce_sum("mean", x, all_axes(x), false, true); }
Tensor sum(const Tensor& x, const std::vector<int>& axes, bool keepdim) { return reduce_sum("sum", x, axes, keepdim, false); }
Tensor mean(const Tensor& x, const std::vector<int>& axes, bool keepdim) {
  return reduce_sum("mean", x, axes, keepdim, true);
}

std::pair<Tensor, Tensor> max_last(const Tensor& x) {
  op_checks::floating("max_last", x);
  CNN_CHECK(x.dim() >= 1 && x.size(-1) > 0, "max_last: needs a non-empty last axis, got ", describe(x));
  const int64_t cols = x.size(-1), rows = x.numel() / cols;
  std::vector<int64_t> out_dims = x.shape().to_vector();
  out_dims.pop_back();
  const Shape out_shape(out_dims);
  Tensor values = Tensor::empty(out_shape, x.dtype(), x.device());
  Tensor indices = Tensor::empty(out_shape, DType::i64, x.device());
  CNN_KERNEL(x.device(), max_last, x.dtype(), x.data(), values.data(), indices.data_as<int64_t>(), rows, cols);
  const Shape in_shape = x.shape();
  record_op("max_last", {x}, {values, indices},
            [indices, in_shape, rows, cols](const std::vector<Tensor>& g) -> std::vector<Tensor> {
              const Tensor& gy = g[0];
              if (!gy.defined()) return {Tensor()};
              Tensor gx = Tensor::empty(in_shape, gy.dtype(), gy.device());
              const int64_t* idx = indices.data_as<int64_t>();
              CNN_KERNEL(gy.device(), max_last_backward, gy.dtype(), gy.data(), idx, gx.data(), rows, cols);
              return {gx};
            });
  return {values, indices};
}

}  // namespace cnn
