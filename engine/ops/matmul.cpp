// Matrix products on the GEMM of kernels/gemm.h (OpenBLAS on CPU, cuBLAS on CUDA).
// matmul: C = A B; dA = dC B^T, dB = A^T dC.
// linear: y = x W^T + b over the rows of x; dx = dy W, dW = dy^T x, db = sum of dy over rows.
#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/ops/op_checks.h"
#include "engine/tape.h"
#include "kernels/gemm.h"
#include "kernels/reduce.h"

namespace cnn {

namespace {
// What cuBLAS needs for a GEMM on a CUDA device: its handle and the workspace of the device's current
// stream. Empty on the CPU.
struct CublasResources {
  void* handle = nullptr;
  cuda::Workspace workspace;
  bool allow_tf32 = false;
};

CublasResources cublas_resources(const Device& device) {
  CublasResources r;
  if (device.is_cpu()) return r;
  cuda::set_device(device.index);
  r.workspace = cuda::cublas_workspace(device.index);
  r.handle = cuda::cublas_handle(device.index);
  r.allow_tf32 = cuda::allow_tf32();
  return r;
}

// out[m, n] = op(a) op(b) (+ out when accumulate) for 2-D row-major a and b.
void gemm_into(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& out, bool accumulate = false) {
  kernels::GemmShape shape;
  shape.trans_a = trans_a;
  shape.trans_b = trans_b;
  shape.m = trans_a ? a.size(1) : a.size(0);
  shape.k = trans_a ? a.size(0) : a.size(1);
  shape.n = trans_b ? b.size(0) : b.size(1);
  shape.lda = a.size(1);
  shape.ldb = b.size(1);
  shape.ldc = out.size(1);
  const double beta = accumulate ? 1.0 : 0.0;
  const CublasResources r = cublas_resources(a.device());
  CNN_KERNEL(a.device(), gemm, a.dtype(), shape, 1.0, a.data(), b.data(), beta, out.data(), r.handle, r.workspace.data,
             r.workspace.bytes, r.allow_tf32);
}

Tensor gemm_new(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b) {
  const int64_t m = trans_a ? a.size(1) : a.size(0), n = trans_b ? b.size(0) : b.size(1);
  Tensor out = Tensor::empty({m, n}, a.dtype(), a.device());
  gemm_into(a, trans_a, b, trans_b, out);
  return out;
}
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  op_checks::same_device_dtype("matmul", a, b);
  op_checks::floating("matmul", a);
  op_checks::rank("matmul", a, 2, "the first operand");
  op_checks::rank("matmul", b, 2, "the second operand");
  CNN_CHECK(a.size(1) == b.size(0), "matmul: inner dimensions differ: ", describe(a), " x ", describe(b));
  Tensor c = gemm_new(a, false, b, false);
  const bool want_a = a.requires_grad(), want_b = b.requires_grad();
  record_op("matmul", {a, b}, {c}, [a, b, want_a, want_b](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    return {want_a ? gemm_new(g[0], false, b, true) : Tensor(), want_b ? gemm_new(a, true, g[0], false) : Tensor()};
  });
  return c;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  op_checks::same_device_dtype("linear", x, weight);
  op_checks::floating("linear", x);
  op_checks::rank("linear", weight, 2, "the weight [out, in]");
  CNN_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), "linear: input ", describe(x),
            " does not end in the weight's in_features (weight ", describe(weight), ")");
  const int64_t out_features = weight.size(0);
  if (bias.defined()) {
    op_checks::same_device_dtype("linear", x, bias);
    CNN_CHECK(bias.dim() == 1 && bias.size(0) == out_features, "linear: bias ", describe(bias), " must be [",
              out_features, "] for weight ", describe(weight));
  }
  const Tensor rows = x.detach().flatten_rows();  // detached: the pieces below are recorded as one op
  Tensor y2 = Tensor::empty({rows.size(0), out_features}, x.dtype(), x.device());
  if (bias.defined()) {
    // Start from the bias in every row; the GEMM accumulates the product into it.
    const int64_t batch = rows.size(0);
    CNN_KERNEL(x.device(), expand_middle, x.dtype(), bias.data(), y2.data(), 1, batch, out_features, 1.0);
  }
  gemm_into(rows, false, weight, true, y2, /*accumulate=*/bias.defined());
  std::vector<int64_t> out_dims = x.shape().to_vector();
  out_dims.back() = out_features;
  Tensor y = y2.reshape(Shape(out_dims));

  const bool want_x = x.requires_grad(), want_w = weight.requires_grad(), want_b = bias.defined() && bias.requires_grad();
  const Shape x_shape = x.shape();
  record_op("linear", {x, weight, bias}, {y},
            [rows, weight, x_shape, want_x, want_w, want_b](const std::vector<Tensor>& g) -> std::vector<Tensor> {
              const Tensor gy = g[0].flatten_rows();
              std::vector<Tensor> grads(3);
              if (want_x) grads[0] = gemm_new(gy, false, weight, false).reshape(x_shape);
              if (want_w) grads[1] = gemm_new(gy, true, rows, false);
              if (want_b) grads[2] = sum(gy, {0});
              return grads;
            });
  return y;
}

}  // namespace cnn
