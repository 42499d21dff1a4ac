// Binary elementwise ops with broadcasting. The output is viewed as [outer, mid, inner]; each operand
// is either full size or broadcast along one run of adjacent axes (kernels/common/elementwise_math.h,
// BroadcastIndex). Backward computes full-size gradients and sums a broadcast operand's gradient
// over the run it was broadcast along.
#include <algorithm>

#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/ops/middle_sum.h"
#include "engine/ops/op_checks.h"
#include "engine/tape.h"
#include "kernels/elementwise.h"
#include "kernels/reduce.h"

namespace cnn {

namespace {
struct OperandLayout {
  BroadcastIndex index;
  int64_t outer = 1;  // output elements before the broadcast run, per inner block
};

const char* binary_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return "add";
    case BinaryOp::sub: return "sub";
    case BinaryOp::mul: return "mul";
    case BinaryOp::div: return "div";
  }
  return "binary";
}

// Where `operand` sits in `out` (its broadcast shape), or a cnn::Error for unsupported patterns.
OperandLayout layout_of(const char* op, const Shape& operand, const Shape& out) {
  const int rank = out.rank(), pad = rank - operand.rank();
  auto dim_of = [&](int axis) { return axis < pad ? int64_t(1) : operand[axis - pad]; };
  int first = -1, last = -1;
  for (int axis = 0; axis < rank; ++axis) {
    if (dim_of(axis) == 1 && out[axis] != 1) {
      if (first < 0) first = axis;
      last = axis;
    }
  }
  OperandLayout layout;
  if (first < 0) return layout;  // not broadcast
  for (int axis = first; axis <= last; ++axis)
    CNN_CHECK(dim_of(axis) == 1 || out[axis] == 1, op, ": operand of shape ", operand.str(), " is broadcast to ",
              out.str(), " along axes that are not adjacent; supported patterns are same shape, scalar, [C] against "
              "[..., C] and [N,1,1,C] against [N,H,W,C]");
  int64_t mid = 1, inner = 1, outer = 1;
  for (int axis = 0; axis < first; ++axis) outer *= out[axis];
  for (int axis = first; axis <= last; ++axis) mid *= out[axis];
  for (int axis = last + 1; axis < rank; ++axis) inner *= out[axis];
  layout.index = BroadcastIndex{mid, inner};
  layout.outer = outer;
  return layout;
}

// Sums a full-size gradient back to the shape of a broadcast operand.
Tensor reduce_to_operand(const Tensor& full, const OperandLayout& layout, const Shape& operand_shape) {
  if (layout.index.mid == 1) return full.reshape(operand_shape);
  Tensor out = Tensor::empty(operand_shape, full.dtype(), full.device());
  middle_sum(full, out, layout.outer, layout.index.mid, layout.index.inner, 1.0);
  return out;
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = binary_name(op);
  op_checks::same_device_dtype(name, a, b);
  op_checks::floating(name, a);
  const Shape out_shape = broadcast_shape(a.shape(), b.shape());
  const OperandLayout la = layout_of(name, a.shape(), out_shape), lb = layout_of(name, b.shape(), out_shape);
  Tensor y = Tensor::empty(out_shape, a.dtype(), a.device());
  const int64_t n = y.numel();
  CNN_KERNEL(a.device(), binary_forward, op, a.dtype(), a.data(), la.index, b.data(), lb.index, y.data(), n);

  const bool want_a = a.requires_grad(), want_b = b.requires_grad();
  if (op == BinaryOp::add || op == BinaryOp::sub) {
    // d/da = 1, d/db = +-1: nothing needs saving.
    const Shape sa = a.shape(), sb = b.shape();
    record_op(name, {a, b}, {y}, [op, la, lb, sa, sb, want_a, want_b](const std::vector<Tensor>& g) {
      std::vector<Tensor> grads(2);
      if (want_a) grads[0] = reduce_to_operand(g[0], la, sa);
      if (want_b) grads[1] = reduce_to_operand(op == BinaryOp::sub ? neg(g[0]) : g[0], lb, sb);
      return grads;
    });
    return y;
  }
  record_op(name, {a, b}, {y}, [op, a, b, la, lb, want_a, want_b](const std::vector<Tensor>& g) {
    const Tensor& gy = g[0];
    Tensor ga_full, gb_full;
    if (want_a) ga_full = Tensor::empty(gy.shape(), gy.dtype(), gy.device());
    if (want_b) gb_full = Tensor::empty(gy.shape(), gy.dtype(), gy.device());
    void* ga = want_a ? ga_full.data() : nullptr;
    void* gb = want_b ? gb_full.data() : nullptr;
    CNN_KERNEL(gy.device(), binary_backward, op, a.dtype(), a.data(), la.index, b.data(), lb.index, gy.data(), ga, gb,
               gy.numel());
    std::vector<Tensor> grads(2);
    if (want_a) grads[0] = reduce_to_operand(ga_full, la, a.shape());
    if (want_b) grads[1] = reduce_to_operand(gb_full, lb, b.shape());
    return grads;
  });
  return y;
}
}  // namespace

Shape broadcast_shape(const Shape& a, const Shape& b) {
  const int rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> dims(static_cast<size_t>(rank));
  for (int i = 0; i < rank; ++i) {
    const int ia = a.rank() - rank + i, ib = b.rank() - rank + i;
    const int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    CNN_CHECK(da == db || da == 1 || db == 1, "shapes ", a.str(), " and ", b.str(), " cannot be broadcast together (axis ",
              i, ": ", da, " vs ", db, ")");
    dims[static_cast<size_t>(i)] = da == 1 ? db : da;
  }
  return Shape(dims);
}

Tensor add(const Tensor& a, const Tensor& b) { return binary(BinaryOp::add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(BinaryOp::sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryOp::mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryOp::div, a, b); }

void add_(Tensor& a, const Tensor& b) {
  op_checks::same_device_dtype("add_", a, b);
  CNN_CHECK(a.shape() == b.shape(), "add_: in-place add needs equal shapes, got ", describe(a), " and ", describe(b));
  const BroadcastIndex same;
  CNN_KERNEL(a.device(), binary_forward, BinaryOp::add, a.dtype(), a.data(), same, b.data(), same, a.data(), a.numel());
}

void increment_(const Tensor& counter) {
  CNN_CHECK(counter.dtype() == DType::i64 && counter.numel() == 1, "increment_: needs one i64 count, got ",
            describe(counter));
  CNN_KERNEL(counter.device(), increment_count, counter.data());
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }

}  // namespace cnn
