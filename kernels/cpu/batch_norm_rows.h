// The row machinery of the CPU BatchNorm kernels (kernels/cpu/batch_norm.cpp): the per-channel sums
// over row blocks in a fixed order, the relu mask, and one row of each pass. The forward row also
// serves the BatchNorm + ReLU + max-pool forward (kernels/cpu/batch_norm_pool.cpp), which must
// produce the same bits.
//
// Sums: the rows are cut into at most 256 blocks of a size fixed by M alone; the threads share the
// blocks, each summed kRowGroup rows at a time, and the blocks' sums are then added in block order,
// so the result does not depend on the thread count. They accumulate in double (see batch_norm.cpp).
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/batch_norm.h"
#include "kernels/common/batch_norm_math.h"
#include "kernels/common/error.h"
#include "kernels/common/half.h"

namespace cnn::kernels::cpu::batch_norm_rows {

// A per-channel array, or `fallback` in every channel when p is null; hoisted out of the element
// loops so that they stay branch-free.
template <class A>
std::vector<A> channel_values(const void* p, int64_t c, A fallback) {
  if (!p) return std::vector<A>(static_cast<size_t>(c), fallback);
  const A* v = static_cast<const A*>(p);
  return std::vector<A>(v, v + c);
}

// Rows taken together by the sums' inner loops: their terms are added to each other first, so the
// running sums in memory are loaded and stored once per kRowGroup rows instead of once per row.
constexpr int64_t kRowGroup = 4;  // the grouped loops add (r0 + r1) + (r2 + r3)

// Whether a group's terms are added in float before they join the double sums: for the 16-bit
// types, whose values carry 8 (bf16) or 11 (f16) significant bits, so that each term (a difference
// of two of them, its square, a product dz * xhat) is exact or within 2^-24 of itself in float, and
// a sum of four adds about as much; the double sums still carry the long sums over rows. Twice the
// lanes per vector instruction, where the passes over bf16 activations were bound by the double
// arithmetic. (A square overflows float past 1.8e19, where double did not; activations that large
// have overflowed elsewhere already.) f32 and f64 keep every term in double.
template <class T>
constexpr bool kGroupInFloat = sizeof(T) == 2;
// The type a group's terms are added in.
template <class T>
using group_t = std::conditional_t<kGroupInFloat<T>, float, double>;

// Per-channel sums of kCount quantities over the m rows: add_rows(r, n, sums) adds the terms of rows
// r .. r + n - 1 (n = kRowGroup, or fewer at a block's end) to sums[k * c + ch] (quantity k, channel
// ch). Returns the kCount * c totals.
template <int kCount, class AddRows>
std::vector<double> channel_sums(int64_t m, int64_t c, AddRows add_rows) {
  const int64_t rows_per_block = std::max<int64_t>(64, (m + 255) / 256);
  const int64_t blocks = (m + rows_per_block - 1) / rows_per_block, width = kCount * c;
  std::vector<double> partial(static_cast<size_t>(blocks * width), 0.0);
#pragma omp parallel for schedule(static) if (m * c > 65536)
  for (int64_t b = 0; b < blocks; ++b) {
    double* sums = partial.data() + b * width;
    const int64_t end = std::min(m, (b + 1) * rows_per_block);
    for (int64_t r = b * rows_per_block; r < end; r += kRowGroup) add_rows(r, std::min(kRowGroup, end - r), sums);
  }
  std::vector<double> total(static_cast<size_t>(width), 0.0);
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t i = 0; i < width; ++i) total[static_cast<size_t>(i)] += partial[static_cast<size_t>(b * width + i)];
  return total;
}

// Where the relu mask of the backward comes from: no activation, the saved output y, or z computed
// again from x (kernels/batch_norm.h).
enum class Mask { none, from_output, from_input };

inline Mask mask_for(BatchNormActivation act, const void* y, DType dt, const char* kernel) {
  if (act == BatchNormActivation::none) return Mask::none;
  if (y != nullptr) return Mask::from_output;
  CNN_CHECK(batch_norm_mask_from_input(dt, act), kernel, ": the relu mask of ", dtype_name(dt),
            act == BatchNormActivation::add_relu ? " with a residual" : "",
            " needs the forward's output y (it can be computed again from x only for relu in f32 or f64)");
  return Mask::from_input;
}

// f(mask constant) with the mask as a compile-time constant, so that the loops are branch-free.
template <class F>
void with_mask(Mask mask, F&& f) {
  switch (mask) {
    case Mask::none: f(std::integral_constant<Mask, Mask::none>{}); return;
    case Mask::from_output: f(std::integral_constant<Mask, Mask::from_output>{}); return;
    case Mask::from_input: f(std::integral_constant<Mask, Mask::from_input>{}); return;
  }
}

// dz: dy through the relu mask of element i of channel ch, whose normalised input is xhat.
template <Mask kMask, class T, class A>
inline A masked_grad(const T* __restrict dy, const T* __restrict y, int64_t i, A xhat, A weight, A bias) {
  A dz = to_compute(dy[i]);
  if constexpr (kMask == Mask::from_output) dz = batch_norm_relu_grad<A>(dz, to_compute(y[i]));
  if constexpr (kMask == Mask::from_input) dz = batch_norm_relu_grad<A>(dz, batch_norm_affine<A>(xhat, weight, bias));
  return dz;
}

// Per-channel parameters of the loops, hoisted out of them (weight 1 and bias 0 when null, as in
// the forward, so that a recomputed mask sees the forward's values).
template <class A>
struct ChannelParameters {
  std::vector<A> mean, invstd, weight, bias;
  ChannelParameters(const void* mean_p, const void* invstd_p, const void* weight_p, const void* bias_p, int64_t c)
      : mean(channel_values<A>(mean_p, c, A(0))),
        invstd(channel_values<A>(invstd_p, c, A(1))),
        weight(channel_values<A>(weight_p, c, A(1))),
        bias(channel_values<A>(bias_p, c, A(0))) {}
};

// The forward of one row of c channels: y = act(xhat * weight + bias [+ residual]) (kAct a
// compile-time constant, so that the channel loop is branch-free).
template <BatchNormActivation kAct, class T>
inline void forward_row(const T* __restrict x, const T* __restrict residual, int64_t c,
                        const ChannelParameters<compute_t<T>>& p, T* __restrict y) {
  using A = compute_t<T>;
  const A *mu = p.mean.data(), *inv = p.invstd.data(), *w = p.weight.data(), *b = p.bias.data();
  for (int64_t ch = 0; ch < c; ++ch)
    y[ch] = from_compute<T>(batch_norm_output<A>(to_compute(x[ch]), mu[ch], inv[ch], w[ch], b[ch],
                                                 kAct == BatchNormActivation::add_relu ? A(to_compute(residual[ch])) : A(0),
                                                 kAct));
}

// The terms of n consecutive rows of the backward sums (the sum of dz and of dz * xhat), a group of
// kRowGroup rows added to each other first (see channel_sums). The arrays are declared not to
// overlap: the two sums live in one buffer, and without that promise the compiler must assume a
// store to one may change the other, and leaves the loop scalar (about ten times slower).
template <class T, Mask kMask>
inline void backward_reduce_rows(const T* __restrict dy, const T* __restrict y, const T* __restrict x, int64_t n,
                                 int64_t c, const ChannelParameters<compute_t<T>>& p, double* __restrict sum_dz,
                                 double* __restrict sum_dz_xhat) {
  using A = compute_t<T>;
  const A *mu = p.mean.data(), *inv = p.invstd.data(), *w = p.weight.data(), *b = p.bias.data();
  // dz and dz * xhat of element i, in the type of the outputs (double, or group_t<T> in a group).
  auto terms = [&](int64_t i, int64_t ch, auto& dz_out, auto& dz_xhat_out) {
    using S = std::remove_reference_t<decltype(dz_out)>;
    const A xhat = batch_norm_xhat<A>(to_compute(x[i]), mu[ch], inv[ch]);
    dz_out = static_cast<S>(masked_grad<kMask>(dy, y, i, xhat, w[ch], b[ch]));
    dz_xhat_out = dz_out * static_cast<S>(xhat);
  };
  if (n == kRowGroup) {
    for (int64_t ch = 0; ch < c; ++ch) {
      group_t<T> dz[kRowGroup], dz_xhat[kRowGroup];
      for (int64_t k = 0; k < kRowGroup; ++k) terms(k * c + ch, ch, dz[k], dz_xhat[k]);
      sum_dz[ch] += static_cast<double>((dz[0] + dz[1]) + (dz[2] + dz[3]));
      sum_dz_xhat[ch] += static_cast<double>((dz_xhat[0] + dz_xhat[1]) + (dz_xhat[2] + dz_xhat[3]));
    }
    return;
  }
  for (int64_t k = 0; k < n; ++k)
    for (int64_t ch = 0; ch < c; ++ch) {
      double dz, dz_xhat;
      terms(k * c + ch, ch, dz, dz_xhat);
      sum_dz[ch] += dz;
      sum_dz_xhat[ch] += dz_xhat;
    }
}

// The totals of the backward sums, in the statistics type.
template <class A>
void store_sums(const std::vector<double>& sums, int64_t c, A* sum_dz, A* sum_dz_xhat) {
  for (int64_t ch = 0; ch < c; ++ch) {
    sum_dz[ch] = static_cast<A>(sums[static_cast<size_t>(ch)]);
    sum_dz_xhat[ch] = static_cast<A>(sums[static_cast<size_t>(c + ch)]);
  }
}

// The per-channel inputs of the input-gradient pass.
template <class A>
struct InputGradientTerms {
  const ChannelParameters<A>& p;
  std::vector<A> sum_dz, sum_dz_xhat;
  A inv_m;
  InputGradientTerms(const ChannelParameters<A>& params, const void* s1, const void* s2, int64_t c, int64_t m)
      : p(params),
        sum_dz(channel_values<A>(s1, c, A(0))),
        sum_dz_xhat(channel_values<A>(s2, c, A(0))),
        inv_m(A(1) / static_cast<A>(m)) {}
};

// One row of the input gradient: dx (may be null) and, for add_relu, dresidual = dz (may be null).
template <class T, Mask kMask, bool kTraining>
inline void backward_input_row(const T* __restrict dy, const T* __restrict y, const T* __restrict x, int64_t c,
                               const InputGradientTerms<compute_t<T>>& t, T* __restrict dx, T* __restrict dresidual) {
  using A = compute_t<T>;
  const A *mu = t.p.mean.data(), *inv = t.p.invstd.data(), *w = t.p.weight.data(), *b = t.p.bias.data();
  const A *s1 = t.sum_dz.data(), *s2 = t.sum_dz_xhat.data();
  // Which outputs are written, as compile-time constants: a test of the pointers in the loop kept
  // the bf16 loop from vectorizing.
  auto channels = [&](auto writes_dx, auto writes_dresidual) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const A xhat = batch_norm_xhat<A>(to_compute(x[ch]), mu[ch], inv[ch]);
      const A dz = masked_grad<kMask>(dy, y, ch, xhat, w[ch], b[ch]);
      if constexpr (decltype(writes_dresidual)::value) dresidual[ch] = from_compute<T>(dz);
      if constexpr (decltype(writes_dx)::value)
        dx[ch] = from_compute<T>(batch_norm_input_grad<A>(dz, xhat, inv[ch], w[ch], s1[ch], s2[ch], t.inv_m, kTraining));
    }
  };
  if (dx && dresidual) channels(std::true_type{}, std::true_type{});
  else if (dx) channels(std::true_type{}, std::false_type{});
  else if (dresidual) channels(std::false_type{}, std::true_type{});
}

// f(training constant) with the mode as a compile-time constant.
template <class F>
void with_training(bool training, F&& f) {
  if (training)
    f(std::true_type{});
  else
    f(std::false_type{});
}

}  // namespace cnn::kernels::cpu::batch_norm_rows
