// batch_norm_relu_max_pool2d on the CPU (fused kernels, kernels/batch_norm_pool.h) gives the same
// bits as batch_norm2d (relu) followed by max_pool2d: output, input/weight/bias gradients and
// running statistics, in every floating dtype, training and eval, for windows that tile, leave
// pixels uncovered, clip in ceil mode or leave gaps, with ties and NaNs in the windows (and for
// overlapping windows, which the op leaves to the two ops).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "engine/cnn.h"

using namespace cnn;

namespace {

// Values on a grid of 1/4 plus 0..3 / 128: windows hold exact ties, and values so close that they
// round to the same f16/bf16 after normalisation though not in f32 (where pooling the unrounded
// values would pick another argmax). All exact in every dtype; a few NaNs when asked.
Tensor grid_values(const Shape& shape, uint32_t seed, bool with_nan) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> step(-8, 8), fine(0, 3);
  const int64_t count = Tensor::empty(shape).numel();
  std::vector<double> v(static_cast<size_t>(count));
  for (double& x : v) x = 0.25 * step(rng) + fine(rng) / 128.0;
  if (with_nan) v[7] = v[static_cast<size_t>(count / 2)] = std::numeric_limits<double>::quiet_NaN();
  return Tensor::from_vector(v, shape);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.data(), b.data(), static_cast<size_t>(a.numel()) * dtype_size(a.dtype())) == 0;
}

struct Result {
  Tensor y, dx, dw, db, running_mean, running_var;
};

// One forward and backward (of sum(y * g)) through `f`, on fresh copies of the inputs.
template <class F>
Result run(const Tensor& x0, const Tensor& w0, const Tensor& b0, const Tensor& g, F f) {
  Result r;
  Tensor x = x0.clone(), w = w0.clone(), b = b0.clone();
  r.running_mean = Tensor::zeros(w0.shape(), w0.dtype());
  r.running_var = Tensor::ones(w0.shape(), w0.dtype());
  x.requires_grad_();
  w.requires_grad_();
  b.requires_grad_();
  Tape tape;
  Tensor loss;
  {
    Tape::Recording rec(tape);
    r.y = f(x, w, b, r.running_mean, r.running_var);
    loss = sum(mul(r.y, g));
  }
  tape.backward(loss);
  r.dx = x.grad();
  r.dw = w.grad();
  r.db = b.grad();
  return r;
}

Pool2dOptions window(int kernel, int stride, int pad, bool ceil_mode) {
  Pool2dOptions o;
  o.kernel_h = o.kernel_w = kernel;
  o.stride_h = o.stride_w = stride;
  o.pad_h = o.pad_w = pad;
  o.ceil_mode = ceil_mode;
  return o;
}

}  // namespace

TEST_CASE("batch_norm_relu_max_pool2d on the CPU: the same bits as batch_norm2d (relu) then max_pool2d") {
  const struct {
    const char* name;
    Pool2dOptions pool;
  } windows[] = {{"2x2 tiling", window(2, 2, 0, false)},
                 {"2x2 with the last column uncovered", window(2, 2, 0, false)},
                 {"3x3 stride 2 pad 1", window(3, 2, 1, false)},
                 {"3x3 stride 2 ceil mode", window(3, 2, 0, true)},
                 {"2x2 ceil mode, the last window clipped", window(2, 2, 0, true)},
                 {"2x2 stride 3 (gaps)", window(2, 3, 0, false)}};
  for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
    for (bool training : {true, false}) {
      for (bool with_nan : {false, true}) {
        for (size_t k = 0; k < std::size(windows); ++k) {
          const Shape shape{3, 8, k == 0 ? 8 : 9, 5};
          INFO(dtype_name(dt) << (training ? " train " : " eval ") << windows[k].name << (with_nan ? " with NaN" : ""));
          const DType stats = dt == DType::f64 ? DType::f64 : DType::f32;
          const Tensor x = grid_values(shape, 1, with_nan).to(dt);
          const Tensor w = Tensor::uniform({5}, -1.5, 1.5, 2, stats), b = Tensor::uniform({5}, -0.5, 0.5, 3, stats);
          const Pool2dOptions pool = windows[k].pool;
          const Tensor y_shape_probe = max_pool2d(Tensor::zeros(shape, dt), pool);
          const Tensor g = Tensor::uniform(y_shape_probe.shape(), -1, 1, 4, DType::f64).to(dt);
          const Result fused = run(x, w, b, g, [&](Tensor xs, Tensor ws, Tensor bs, Tensor rm, Tensor rv) {
            return batch_norm_relu_max_pool2d(xs, ws, bs, rm, rv, training, 0.1, 1e-5, pool);
          });
          const Result separate = run(x, w, b, g, [&](Tensor xs, Tensor ws, Tensor bs, Tensor rm, Tensor rv) {
            return max_pool2d(batch_norm2d(xs, ws, bs, rm, rv, training, 0.1, 1e-5, BatchNormActivation::relu), pool);
          });
          CHECK(same_bits(fused.y, separate.y));
          CHECK(same_bits(fused.dx, separate.dx));
          CHECK(same_bits(fused.dw, separate.dw));
          CHECK(same_bits(fused.db, separate.db));
          CHECK(same_bits(fused.running_mean, separate.running_mean));
          CHECK(same_bits(fused.running_var, separate.running_var));
        }
      }
    }
  }
}
