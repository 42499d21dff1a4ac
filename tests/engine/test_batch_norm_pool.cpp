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
#include "kernels/batch_norm.h"
#include "kernels/batch_norm_pool.h"
#include "kernels/pool.h"

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

// The backward kernels by themselves, on geometries the op never gives them too (overlapping
// windows, where a pixel's gradient gathers from several outputs, and adaptive bins): the sums and
// dx are those of max_pool2d_backward followed by batch_norm_backward_reduce/input, bit for bit.
TEST_CASE("batch_norm_relu_max_pool backward kernels: the bits of the max-pool backward then the BatchNorm passes") {
  struct Case {
    const char* name;
    int64_t h, w, oh, ow;
    int kernel, stride, pad;
    bool adaptive;
  };
  const Case cases[] = {{"2x2 tiling", 8, 8, 4, 4, 2, 2, 0, false},
                        {"3x3 stride 2 pad 1 (overlapping)", 9, 9, 5, 5, 3, 2, 1, false},
                        {"3x3 stride 1 (overlapping)", 7, 7, 5, 5, 3, 1, 0, false},
                        {"2x2 stride 3 (gaps)", 8, 8, 3, 3, 2, 3, 0, false},
                        {"adaptive 7 -> 3 (overlapping bins)", 7, 7, 3, 3, 1, 1, 0, true}};
  for (DType dt : {DType::f32, DType::f64}) {
    for (bool training : {true, false}) {
      for (const Case& k : cases) {
        INFO(dtype_name(dt) << (training ? " train " : " eval ") << k.name);
        kernels::PoolGeometry g;
        g.n = 2, g.h = k.h, g.w = k.w, g.c = 11, g.oh = k.oh, g.ow = k.ow;
        g.kh = g.kw = k.kernel, g.stride_h = g.stride_w = k.stride, g.pad_h = g.pad_w = k.pad;
        g.adaptive = k.adaptive;
        const int64_t m = g.n * g.h * g.w;
        const DType acc = dt;  // the statistics' dtype of f32 and f64 inputs
        const Tensor x = grid_values({g.n, g.h, g.w, g.c}, 5, false).to(dt);
        const Tensor mean = Tensor::uniform({g.c}, -0.5, 0.5, 6, acc), invstd = Tensor::uniform({g.c}, 0.5, 2, 7, acc);
        const Tensor weight = Tensor::uniform({g.c}, -1.5, 1.5, 8, acc), bias = Tensor::uniform({g.c}, -0.5, 0.5, 9, acc);
        const Tensor pooled = Tensor::empty({g.n, g.oh, g.ow, g.c}, dt);
        const Tensor argmax = Tensor::empty({g.n, g.oh, g.ow, g.c}, DType::i32);
        kernels::cpu::batch_norm_relu_max_pool_forward(dt, g, x.data(), mean.data(), invstd.data(), weight.data(),
                                                       bias.data(), pooled.data(), argmax.data_as<int32_t>());
        const Tensor dy = Tensor::uniform(pooled.shape(), -1, 1, 10, DType::f64).to(dt);

        // The separate kernels: the full-size gradient, then the two BatchNorm passes.
        const Tensor dz = Tensor::empty(x.shape(), dt);
        kernels::cpu::max_pool2d_backward(dt, g, dy.data(), argmax.data_as<int32_t>(), dz.data());
        const Tensor sums = Tensor::empty({2, g.c}, acc), dx = Tensor::empty(x.shape(), dt);
        kernels::cpu::batch_norm_backward_reduce(dt, dz.data(), nullptr, x.data(), m, g.c, mean.data(), invstd.data(),
                                                 weight.data(), bias.data(), BatchNormActivation::relu,
                                                 sums.slice(0, 1).data(), sums.slice(1, 2).data(), nullptr);
        kernels::cpu::batch_norm_backward_input(dt, dz.data(), nullptr, x.data(), m, g.c, mean.data(), invstd.data(),
                                                weight.data(), bias.data(), sums.slice(0, 1).data(),
                                                sums.slice(1, 2).data(), training, BatchNormActivation::relu,
                                                dx.data(), nullptr, nullptr);

        const Tensor fused_sums = Tensor::empty({2, g.c}, acc), fused_dx = Tensor::empty(x.shape(), dt);
        kernels::cpu::batch_norm_relu_max_pool_backward_reduce(
            dt, g, dy.data(), argmax.data_as<int32_t>(), x.data(), mean.data(), invstd.data(), weight.data(),
            bias.data(), fused_sums.slice(0, 1).data(), fused_sums.slice(1, 2).data());
        kernels::cpu::batch_norm_relu_max_pool_backward_input(
            dt, g, dy.data(), argmax.data_as<int32_t>(), x.data(), mean.data(), invstd.data(), weight.data(),
            bias.data(), fused_sums.slice(0, 1).data(), fused_sums.slice(1, 2).data(), training, fused_dx.data());
        CHECK(same_bits(fused_sums, sums));
        CHECK(same_bits(fused_dx, dx));
      }
    }
  }
  // The mask comes from x, which needs f32 or f64 (as for batch_norm_backward_reduce without y).
  kernels::PoolGeometry g;
  g.n = 1, g.h = g.w = 2, g.c = 1, g.oh = g.ow = 1, g.kh = g.kw = g.stride_h = g.stride_w = 2;
  CHECK_THROWS_WITH(kernels::cpu::batch_norm_relu_max_pool_backward_reduce(DType::bf16, g, nullptr, nullptr, nullptr,
                                                                           nullptr, nullptr, nullptr, nullptr,
                                                                           nullptr, nullptr),
                    doctest::Contains("needs the forward's output y"));
}
