// f32 and bf16 NHWC convolutions on the CPU through oneDNN: forward, backward-data and
// backward-weights primitives, the CPU counterpart of cuDNN. What it computes is what
// kernels/cpu/conv.cpp computes (that im2col + OpenBLAS path stays the reference, the f64 oracle and
// the fallback). Also inference's forward with an eval-mode BatchNorm folded in (at the end).
//
// How: one primitive per (direction, geometry, thread count), created on first use and kept (oneDNN's
// JIT kernels are generated for the thread count they will run on). Activations stay in our NHWC
// layout; the weights are given to the primitive in the blocked layout it prefers, by a reorder from
// (or, for backward-weights, to) our [O, KH, KW, C/groups] layout on every call, since they change
// every step. Each call brings its own scratchpad (oneDNN's user scratchpad mode), so calls from
// several threads need no lock beyond the cache's. A geometry for which oneDNN has only its reference
// implementation ("ref:...", slower than im2col + GEMM) is declined, and so is any dtype but f32
// and bf16. bf16 runs on AMX tiles or AVX-512 BF16 dot products where the CPU has them: products of
// bf16 values are exact in f32 and summed in f32, and only the output is rounded to bf16, as the
// reference path does (it widens to float); about ten times the f32 throughput on a CPU with AMX.
#include "kernels/cpu/conv_onednn.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/common/error.h"
#include "kernels/cpu/onednn_context.h"

namespace cnn::kernels::cpu {

namespace {
using dnnl::memory;
using Tag = memory::format_tag;

using onednn::Buffer;
using onednn::is_reference;
using onednn::thread_buffer;

// Everything that selects a primitive.
struct Key {
  ConvDirection direction;
  DType dtype;
  std::array<int64_t, 16> geometry;
  int threads;
  bool accumulate;  // backward-data adding into dx (a sum post-op) instead of overwriting it
  auto operator<=>(const Key&) const = default;
};

Key key_of(ConvDirection direction, DType dt, const ConvGeometry& g, bool accumulate = false) {
  return {direction,
          dt,
          {g.n, g.h, g.w, g.c, g.o, g.kh, g.kw, g.oh, g.ow, g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.dilation_h,
           g.dilation_w, g.groups},
          onednn::threads(),
          accumulate};
}

// A primitive ready to run, or the reason oneDNN was declined for its key.
struct Prepared {
  std::string declined;  // "" when usable
  std::string implementation;
  dnnl::primitive primitive;
  memory::desc user_weights, primitive_weights;
  dnnl::reorder weight_reorder;  // user -> primitive (forward, backward-data) or back (backward-weights)
  bool reorders = false;
  memory::desc scratchpad;
  // Backward-data run as the forward convolution of dy with the flipped, transposed weights (see
  // transposed_forward_applies); user_weights then views the flipped weights as [C, O, KH, KW].
  bool as_transposed_forward = false;
  // A pointwise convolution run as a matrix product (see pointwise_matmul_applies): no weight
  // reorder, the operands are our buffers seen through strides.
  bool as_matmul = false;
};

// A stride-1 convolution's backward-data is a forward convolution: dx = conv(dy, W') with
// W'[c][kh][kw][o] = W[o][KH-1-kh][KW-1-kw][c] and padding KH-1-pad. oneDNN 2.6 runs its forwards
// with the brgemm kernels and its backward-data with the older jit ones, which measured 15-25%
// slower on 3x3 layers (compact_cnn's 32->64 at batch 256, ResNet-50's 3x3s), so a stride-1,
// undilated, ungrouped convolution with a spatial kernel takes this way when the forward is a
// brgemm one. 1x1 layers gain nothing (both brgemm-free paths run the same GEMM) and keep theirs.
bool transposed_forward_applies(const ConvGeometry& g, int64_t pad_bottom, int64_t pad_right) {
  return g.groups == 1 && g.stride_h == 1 && g.stride_w == 1 && g.dilation_h == 1 && g.dilation_w == 1 &&
         g.kh * g.kw > 1 && g.pad_h <= g.kh - 1 && g.pad_w <= g.kw - 1 && pad_bottom >= 0 &&
         pad_bottom <= g.kh - 1 && pad_right >= 0 && pad_right <= g.kw - 1;
}
// A backward-data that adds into dx (onednn_conv2d_backward_data_accumulate) needs a primitive that
// takes a sum post-op, which oneDNN's backward-data primitives do not: the transposed forward above,
// or the matrix product of an unstrided bf16 pointwise convolution. An f32 1x1 is declined: its
// transposed weights go through a slow generic reorder, which cost ResNet-50's f32 step more than
// the separate adds it saved (bench_train: backward-data +9 ms per step, adds -15 ms, step within
// noise).

// The dtypes oneDNN is asked for; the rest are declined before any primitive is made.
bool onednn_takes(DType dt) { return dt == DType::f32 || dt == DType::bf16; }

memory::data_type onednn_type(DType dt) { return dt == DType::bf16 ? memory::data_type::bf16 : memory::data_type::f32; }

// A 1x1, unpadded, ungrouped convolution is a matrix product over the M = N*OH*OW output pixels of
// NHWC rows: y[M, O] = x[M, C] W[O, C]^T, dx[M, C] = dy[M, O] W[O, C], dW[O, C] = dy[M, O]^T x[M, C],
// where with a stride x[M, C] is the pixels the windows read, gathered into a buffer first, and
// dx[M, C] is scattered into a zeroed dx after. oneDNN 2.6's matmul runs these on its brgemm
// kernels, where its convolutions run backward-data and backward-weights on older jit ones. In bf16
// on AMX (bench_conv, ResNet-50's 1x1 layers at batch 8) backward-weights took 0.5-0.7 ms against
// 1.3-3.5 ms, and the others up to 3x less at 7x7 and 14x14; in f32 the two were within 10-20% of
// each other, so f32 keeps the convolution primitives (and the bits the default run has always had).
bool pointwise_matmul_applies(DType dt, const ConvGeometry& g) {
  return dt == DType::bf16 && g.kh == 1 && g.kw == 1 && g.pad_h == 0 && g.pad_w == 0 && g.groups == 1;
}

bool strided(const ConvGeometry& g) { return g.stride_h != 1 || g.stride_w != 1; }

// The matrix product of a pointwise convolution's pass: src, weights and dst over (first, second,
// out) in the order of ConvBuffers, with x or dx the gathered pixels when strided, except
// backward-weights, whose src is dy (second) seen transposed and whose weights are x (first).
struct PointwiseMatmul {
  memory::desc src, weights, dst;
};

PointwiseMatmul pointwise_matmul(ConvDirection direction, memory::data_type type, const ConvGeometry& g) {
  const int64_t m = g.n * g.oh * g.ow, c = g.c, o = g.o;
  const auto rows = [&](int64_t r, int64_t k) { return memory::desc({r, k}, type, memory::dims{k, 1}); };
  const auto transposed = [&](int64_t r, int64_t k) { return memory::desc({r, k}, type, memory::dims{1, r}); };
  switch (direction) {
    case ConvDirection::forward: return {rows(m, c), transposed(c, o), rows(m, o)};
    case ConvDirection::backward_data: return {rows(m, o), rows(o, c), rows(m, c)};
    case ConvDirection::backward_filter: return {transposed(o, m), rows(m, c), rows(o, c)};
  }
  return {};
}

// The pixels a strided 1x1 convolution reads, x[n, oy * stride, ox * stride, :], as rows [M, C] of
// `to`; and back: dx zero except those pixels, which take the rows of `from`.
void gather_pixels(const ConvGeometry& g, size_t element, const void* x, void* to) {
  const size_t row = static_cast<size_t>(g.c) * element;
  const auto* in = static_cast<const std::byte*>(x);
  auto* out = static_cast<std::byte*>(to);
#pragma omp parallel for schedule(static)
  for (int64_t image_row = 0; image_row < g.n * g.oh; ++image_row) {
    const int64_t n = image_row / g.oh, iy = image_row % g.oh * g.stride_h;
    for (int64_t ox = 0; ox < g.ow; ++ox)
      std::memcpy(out + static_cast<size_t>(image_row * g.ow + ox) * row,
                  in + static_cast<size_t>((n * g.h + iy) * g.w + ox * g.stride_w) * row, row);
  }
}

void scatter_pixels(const ConvGeometry& g, size_t element, const void* from, void* dx) {
  const size_t row = static_cast<size_t>(g.c) * element;
  const auto* in = static_cast<const std::byte*>(from);
  auto* out = static_cast<std::byte*>(dx);
#pragma omp parallel for schedule(static)
  for (int64_t image_row = 0; image_row < g.n * g.h; ++image_row) {
    const int64_t n = image_row / g.h, iy = image_row % g.h;
    std::byte* dx_row = out + static_cast<size_t>(image_row * g.w) * row;
    std::memset(dx_row, 0, static_cast<size_t>(g.w) * row);  // all-zero bits are 0.0 in f32 and bf16
    if (iy % g.stride_h != 0 || iy / g.stride_h >= g.oh) continue;
    const int64_t oy = iy / g.stride_h;
    for (int64_t ox = 0; ox < g.ow; ++ox)
      std::memcpy(dx_row + static_cast<size_t>(ox * g.stride_w) * row,
                  in + static_cast<size_t>((n * g.oh + oy) * g.ow + ox) * row, row);
  }
}

memory::desc activations(memory::data_type type, int64_t n, int64_t c, int64_t h, int64_t w) {
  return memory::desc({n, c, h, w}, type, Tag::nhwc);
}

memory::desc weights(memory::data_type type, const ConvGeometry& g, Tag tag) {
  if (g.groups == 1) return memory::desc({g.o, g.c, g.kh, g.kw}, type, tag == Tag::any ? tag : Tag::ohwi);
  return memory::desc({g.groups, g.group_out(), g.group_in(), g.kh, g.kw}, type, tag == Tag::any ? tag : Tag::gohwi);
}

// oneDNN takes the padding on both sides; PyTorch's floor division of the output size leaves the
// right-hand padding implied (it may be less than the left, or negative when the last rows are never
// reached), so it is computed from the output size.
int64_t right_padding(int64_t in, int64_t out, int64_t kernel, int stride, int pad, int dilation) {
  return (out - 1) * stride + (kernel - 1) * dilation + 1 - in - pad;
}

// The window arguments of a convolution descriptor: strides, dilations (oneDNN counts them from 0),
// and the padding on each side.
struct Windows {
  memory::dims strides, dilates, pad_l, pad_r;
};

Windows windows_of(const ConvGeometry& g) {
  return {{g.stride_h, g.stride_w},
          {g.dilation_h - 1, g.dilation_w - 1},
          {g.pad_h, g.pad_w},
          {right_padding(g.h, g.oh, g.kh, g.stride_h, g.pad_h, g.dilation_h),
           right_padding(g.w, g.ow, g.kw, g.stride_w, g.pad_w, g.dilation_w)}};
}

std::unique_ptr<Prepared> prepare(ConvDirection direction, DType dt, const ConvGeometry& g, bool accumulate) {
  auto p = std::make_unique<Prepared>();
  const memory::data_type type = onednn_type(dt);
  const memory::desc src = activations(type, g.n, g.c, g.h, g.w), dst = activations(type, g.n, g.o, g.oh, g.ow);
  const memory::desc any_weights = weights(type, g, Tag::any);
  p->user_weights = weights(type, g, Tag::ohwi);
  const auto [strides, dilates, pad_l, pad_r] = windows_of(g);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (accumulate) {
    dnnl::post_ops sum;
    sum.append_sum(1.f);
    attr.set_post_ops(sum);
  }
  try {
    if (pointwise_matmul_applies(dt, g) && !(accumulate && strided(g))) {
      try {
        const PointwiseMatmul mm = pointwise_matmul(direction, type, g);
        const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(mm.src, mm.weights, mm.dst), attr, onednn::engine());
        if (!is_reference(pd.impl_info_str())) {
          p->primitive = dnnl::primitive(pd);
          p->scratchpad = pd.scratchpad_desc();
          p->as_matmul = true;
          p->implementation = "matmul " + std::string(pd.impl_info_str()) + " (a 1x1 convolution as a matrix product)";
          return p;
        }
      } catch (const dnnl::error&) {
        // no matrix product for it: the convolution primitives below
      }
    }
    const dnnl::convolution_forward::primitive_desc forward(
        {dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, src, any_weights, dst, strides,
         dilates, pad_l, pad_r},
        attr, onednn::engine());
    auto finish = [&](const auto& pd, const memory::desc& primitive_weights, bool weights_are_output) {
      p->implementation = pd.impl_info_str();
      if (is_reference(p->implementation)) {
        p->declined = "oneDNN has only its reference implementation (" + p->implementation + ") for this geometry";
        return;
      }
      p->primitive = dnnl::primitive(pd);
      p->primitive_weights = primitive_weights;
      p->scratchpad = pd.scratchpad_desc();
      p->reorders = primitive_weights != p->user_weights;
      if (p->reorders) {
        const memory::desc& from = weights_are_output ? primitive_weights : p->user_weights;
        const memory::desc& to = weights_are_output ? p->user_weights : primitive_weights;
        p->weight_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(onednn::engine(), from, onednn::engine(), to));
      }
    };
    switch (direction) {
      case ConvDirection::forward:
        finish(forward, forward.weights_desc(), false);
        break;
      case ConvDirection::backward_data: {
        if (transposed_forward_applies(g, pad_r[0], pad_r[1])) {
          // dy [N, O, OH, OW] -> dx [N, C, H, W] through weights [C, O, KH, KW].
          const memory::desc transposed_any({g.c, g.o, g.kh, g.kw}, type, Tag::any);
          const dnnl::convolution_forward::primitive_desc pd(
              {dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, dst, transposed_any, src,
               strides, dilates, {g.kh - 1 - pad_l[0], g.kw - 1 - pad_l[1]}, {g.kh - 1 - pad_r[0], g.kw - 1 - pad_r[1]}},
              attr, onednn::engine());
          if (accumulate || std::string(pd.impl_info_str()).rfind("brg", 0) == 0) {
            // Dims [C, O, KH, KW] over the flipped [O, KH, KW, C] buffer: the transposition as strides.
            p->user_weights =
                memory::desc({g.c, g.o, g.kh, g.kw}, type, memory::dims{1, g.kh * g.kw * g.c, g.kw * g.c, g.c});
            p->as_transposed_forward = true;
            finish(pd, pd.weights_desc(), false);
            p->implementation += " (backward-data as the forward of the flipped, transposed weights)";
            break;
          }
        }
        if (accumulate) {
          p->declined = "no oneDNN primitive adds a backward-data into dx for this geometry";
          break;
        }
        const dnnl::convolution_backward_data::primitive_desc pd(
            {dnnl::algorithm::convolution_direct, src, any_weights, dst, strides, dilates, pad_l, pad_r}, attr,
            onednn::engine(), forward);
        finish(pd, pd.weights_desc(), false);
        break;
      }
      case ConvDirection::backward_filter: {
        const dnnl::convolution_backward_weights::primitive_desc pd(
            {dnnl::algorithm::convolution_direct, src, any_weights, dst, strides, dilates, pad_l, pad_r}, attr,
            onednn::engine(), forward);
        finish(pd, pd.diff_weights_desc(), true);
        break;
      }
    }
  } catch (const dnnl::error& e) {
    p->declined = std::string("oneDNN has no primitive for this geometry (") + e.what() + ")";
  }
  return p;
}

const Prepared& prepared(ConvDirection direction, DType dt, const ConvGeometry& g, bool accumulate = false) {
  return onednn::cached<Key, Prepared>(key_of(direction, dt, g, accumulate),
                                       [&] { return prepare(direction, dt, g, accumulate); });
}

// W flipped along KH and KW, still [O, KH, KW, C], in this thread's transposed_weights buffer: whole rows of C copied
// (as bytes, whatever the dtype). The transposition to [C, KH, KW, O] is left to the primitive's
// weight reorder, which reads this buffer through strides (transposed_user_weights).
const void* flipped(DType dt, const ConvGeometry& g, const void* w) {
  const size_t row = static_cast<size_t>(g.c) * dtype_size(dt);
  const auto* from = static_cast<const std::byte*>(w);
  auto* f = static_cast<std::byte*>(thread_buffer(Buffer::transposed_weights, static_cast<size_t>(g.o * g.kh * g.kw) * row));
  for (int64_t o = 0; o < g.o; ++o)
    for (int64_t kh = 0; kh < g.kh; ++kh)
      for (int64_t kw = 0; kw < g.kw; ++kw)
        std::memcpy(f + static_cast<size_t>((o * g.kh + (g.kh - 1 - kh)) * g.kw + (g.kw - 1 - kw)) * row,
                    from + static_cast<size_t>((o * g.kh + kh) * g.kw + kw) * row, row);
  return f;
}

// ---- inference with BatchNorm folded in ----
// A BatchNorm in eval mode is y * scale + shift per channel. Folded into the convolution, the scale
// multiplies the weights during the reorder into the primitive's layout that every call makes anyway
// (the reorder's per-output-channel scales), and the shift is the bias; the residual is oneDNN's sum
// post-op (dst holds it before the call) and the ReLU an eltwise post-op, so the output is written
// once and no BatchNorm pass reads it back. In bf16 the scaled weights are rounded to bf16.
struct FoldedKey {
  DType dtype;
  std::array<int64_t, 16> geometry;
  int threads;
  bool residual, relu;
  auto operator<=>(const FoldedKey&) const = default;
};

struct FoldedPrepared {
  std::string declined, implementation;
  dnnl::primitive primitive;
  dnnl::reorder scaled_reorder;
  memory::desc user_weights, primitive_weights, bias, scales, scratchpad;
};

std::unique_ptr<FoldedPrepared> prepare_folded(const FoldedKey& key, const ConvGeometry& g) {
  auto p = std::make_unique<FoldedPrepared>();
  const memory::data_type type = onednn_type(key.dtype);
  const memory::desc src = activations(type, g.n, g.c, g.h, g.w), dst = activations(type, g.n, g.o, g.oh, g.ow);
  p->user_weights = weights(type, g, Tag::ohwi);
  p->bias = memory::desc({g.o}, memory::data_type::f32, Tag::x);
  p->scales = memory::desc({g.o}, memory::data_type::f32, Tag::x);
  const auto [strides, dilates, pad_l, pad_r] = windows_of(g);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::post_ops ops;
  if (key.residual) ops.append_sum(1.0f);
  if (key.relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  attr.set_post_ops(ops);
  try {
    const dnnl::convolution_forward::primitive_desc pd(
        {dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src, weights(type, g, Tag::any),
         p->bias, dst, strides, dilates, pad_l, pad_r},
        attr, onednn::engine());
    p->implementation = pd.impl_info_str();
    if (is_reference(p->implementation)) {
      p->declined = "oneDNN has only its reference implementation (" + p->implementation + ") for this geometry";
      return p;
    }
    p->primitive = dnnl::primitive(pd);
    p->primitive_weights = pd.weights_desc();
    p->scratchpad = pd.scratchpad_desc();
    dnnl::primitive_attr scaling;
    scaling.set_output_scales(1 << 0, {DNNL_RUNTIME_F32_VAL});  // per output channel (dimension 0)
    p->scaled_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(onednn::engine(), p->user_weights,
                                                                    onednn::engine(), p->primitive_weights, scaling));
    p->implementation += " with BatchNorm folded in";
  } catch (const dnnl::error& e) {
    p->declined = std::string("oneDNN has no primitive for this geometry (") + e.what() + ")";
  }
  return p;
}

const FoldedPrepared& prepared_folded(DType dt, const ConvGeometry& g, bool residual, bool relu) {
  const FoldedKey key{dt, key_of(ConvDirection::forward, dt, g).geometry, onednn::threads(), residual, relu};
  return onednn::cached<FoldedKey, FoldedPrepared>(key, [&] { return prepare_folded(key, g); });
}

bool folding_takes(DType dt, const ConvGeometry& g) { return onednn_takes(dt) && g.groups == 1; }
}  // namespace

namespace {
// Runs the pass that p was prepared for (see onednn_conv2d).
void run(const Prepared& p, ConvDirection direction, DType dt, const ConvGeometry& g, const void* first,
         const void* second, void* out) {
  dnnl::engine& engine = onednn::engine();
  dnnl::stream stream(engine);
  const memory::data_type type = onednn_type(dt);
  const memory::desc src = activations(type, g.n, g.c, g.h, g.w), dst = activations(type, g.n, g.o, g.oh, g.ow);
  const memory scratchpad(p.scratchpad, engine, thread_buffer(Buffer::scratchpad, p.scratchpad.get_size()));
  // The weights as the primitive takes them: ours, or a reordered copy.
  const void* user_weights = direction == ConvDirection::backward_filter ? out : second;
  if (p.as_transposed_forward) user_weights = flipped(dt, g, second);
  memory user(p.user_weights, engine, const_cast<void*>(user_weights));
  memory primitive_weights =
      p.reorders ? memory(p.primitive_weights, engine, thread_buffer(Buffer::weights, p.primitive_weights.get_size())) : user;
  try {
    if (p.as_matmul) {
      const PointwiseMatmul mm = pointwise_matmul(direction, type, g);
      // With a stride, x's pixels (forward, backward-weights) or dx's (backward-data) go through
      // this thread's pixels buffer as [M, C] rows.
      void* pixels = strided(g) ? thread_buffer(Buffer::pixels, static_cast<size_t>(g.n * g.oh * g.ow * g.c) * dtype_size(dt)) : nullptr;
      const void* x = direction == ConvDirection::backward_data ? nullptr : first;
      if (pixels && x) gather_pixels(g, dtype_size(dt), x, pixels);
      const void* x_rows = pixels ? pixels : x;
      void* dst = pixels && direction == ConvDirection::backward_data ? pixels : out;
      const void* src = direction == ConvDirection::backward_filter ? second : direction == ConvDirection::forward ? x_rows : first;
      const void* weights = direction == ConvDirection::backward_filter ? x_rows : second;
      p.primitive.execute(stream, {{DNNL_ARG_SRC, memory(mm.src, engine, const_cast<void*>(src))},
                                   {DNNL_ARG_WEIGHTS, memory(mm.weights, engine, const_cast<void*>(weights))},
                                   {DNNL_ARG_DST, memory(mm.dst, engine, dst)},
                                   {DNNL_ARG_SCRATCHPAD, scratchpad}});
      stream.wait();
      if (dst != out) scatter_pixels(g, dtype_size(dt), dst, out);
      return;
    }
    switch (direction) {
      case ConvDirection::forward:
      case ConvDirection::backward_data: {
        // The same call with the roles swapped: forward reads x and writes y, backward-data reads dy
        // and writes dx, both through the weights (a forward primitive's roles when backward-data runs
        // as the transposed forward).
        const bool forward = direction == ConvDirection::forward;
        if (p.as_transposed_forward) {
          if (p.reorders) p.weight_reorder.execute(stream, user, primitive_weights);
          p.primitive.execute(stream, {{DNNL_ARG_SRC, memory(dst, engine, const_cast<void*>(first))},
                                       {DNNL_ARG_WEIGHTS, primitive_weights},
                                       {DNNL_ARG_DST, memory(src, engine, out)},
                                       {DNNL_ARG_SCRATCHPAD, scratchpad}});
          break;
        }
        if (p.reorders) p.weight_reorder.execute(stream, user, primitive_weights);
        p.primitive.execute(stream, {{forward ? DNNL_ARG_SRC : DNNL_ARG_DIFF_DST,
                                      memory(forward ? src : dst, engine, const_cast<void*>(first))},
                                     {DNNL_ARG_WEIGHTS, primitive_weights},
                                     {forward ? DNNL_ARG_DST : DNNL_ARG_DIFF_SRC, memory(forward ? dst : src, engine, out)},
                                     {DNNL_ARG_SCRATCHPAD, scratchpad}});
        break;
      }
      case ConvDirection::backward_filter:
        p.primitive.execute(stream, {{DNNL_ARG_SRC, memory(src, engine, const_cast<void*>(first))},
                                     {DNNL_ARG_DIFF_DST, memory(dst, engine, const_cast<void*>(second))},
                                     {DNNL_ARG_DIFF_WEIGHTS, primitive_weights},
                                     {DNNL_ARG_SCRATCHPAD, scratchpad}});
        if (p.reorders) p.weight_reorder.execute(stream, primitive_weights, user);
        break;
    }
    stream.wait();
  } catch (const dnnl::error& e) {
    const char* pass = direction == ConvDirection::forward         ? "forward"
                       : direction == ConvDirection::backward_data ? "backward-data"
                                                                   : "backward-weights";
    CNN_FAIL("oneDNN ", pass, " convolution (", p.implementation, ") failed: ", e.what(),
             "; [train] cpu_convolutions = reference runs this model without oneDNN");
  }
}
}  // namespace

bool onednn_conv2d(ConvDirection direction, DType dt, const ConvGeometry& g, const void* first, const void* second,
                   void* out) {
  if (!onednn_takes(dt)) return false;
  const Prepared& p = prepared(direction, dt, g);
  if (!p.declined.empty()) return false;
  run(p, direction, dt, g, first, second, out);
  return true;
}

std::string onednn_conv2d_implementation(ConvDirection direction, DType dt, const ConvGeometry& g) {
  if (!onednn_takes(dt)) return "";
  const Prepared& p = prepared(direction, dt, g);
  return p.declined.empty() ? p.implementation : "";
}

bool onednn_conv2d_backward_data_accumulate(DType dt, const ConvGeometry& g, const void* dy, const void* w, void* dx) {
  if (!onednn_takes(dt)) return false;
  const Prepared& p = prepared(ConvDirection::backward_data, dt, g, /*accumulate=*/true);
  if (!p.declined.empty()) return false;
  run(p, ConvDirection::backward_data, dt, g, dy, w, dx);
  return true;
}

std::string onednn_conv2d_backward_data_accumulate_implementation(DType dt, const ConvGeometry& g) {
  if (!onednn_takes(dt)) return "";
  const Prepared& p = prepared(ConvDirection::backward_data, dt, g, /*accumulate=*/true);
  return p.declined.empty() ? p.implementation : "";
}

bool onednn_conv2d_folded(DType dt, const ConvGeometry& g, const void* x, const void* w, const FoldedBatchNorm& bn,
                          void* y) {
  if (!folding_takes(dt, g)) return false;
  const FoldedPrepared& p = prepared_folded(dt, g, bn.residual != nullptr, bn.relu);
  if (!p.declined.empty()) return false;
  dnnl::engine& engine = onednn::engine();
  dnnl::stream stream(engine);
  const memory::data_type type = onednn_type(dt);
  if (bn.residual != nullptr && bn.residual != y) {
    // The sum post-op adds what dst holds: the residual, copied in by rows.
    const size_t row = static_cast<size_t>(g.ow * g.o) * dtype_size(dt);
    const auto* from = static_cast<const std::byte*>(bn.residual);
    auto* to = static_cast<std::byte*>(y);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < g.n * g.oh; ++r) std::memcpy(to + static_cast<size_t>(r) * row, from + static_cast<size_t>(r) * row, row);
  }
  const memory primitive_weights(p.primitive_weights, engine,
                                 thread_buffer(Buffer::weights, p.primitive_weights.get_size()));
  try {
    p.scaled_reorder.execute(stream, {{DNNL_ARG_FROM, memory(p.user_weights, engine, const_cast<void*>(w))},
                                      {DNNL_ARG_TO, primitive_weights},
                                      {DNNL_ARG_ATTR_OUTPUT_SCALES, memory(p.scales, engine, const_cast<float*>(bn.scale))}});
    p.primitive.execute(stream, {{DNNL_ARG_SRC, memory(activations(type, g.n, g.c, g.h, g.w), engine, const_cast<void*>(x))},
                                 {DNNL_ARG_WEIGHTS, primitive_weights},
                                 {DNNL_ARG_BIAS, memory(p.bias, engine, const_cast<float*>(bn.shift))},
                                 {DNNL_ARG_DST, memory(activations(type, g.n, g.o, g.oh, g.ow), engine, y)},
                                 {DNNL_ARG_SCRATCHPAD, memory(p.scratchpad, engine,
                                                              thread_buffer(Buffer::scratchpad, p.scratchpad.get_size()))}});
    stream.wait();
  } catch (const dnnl::error& e) {
    CNN_FAIL("oneDNN convolution with BatchNorm folded in (", p.implementation, ") failed: ", e.what(),
             "; [train] cpu_convolutions = reference runs this model without oneDNN");
  }
  return true;
}

std::string onednn_conv2d_folded_implementation(DType dt, const ConvGeometry& g, bool residual, bool relu) {
  if (!folding_takes(dt, g)) return "";
  const FoldedPrepared& p = prepared_folded(dt, g, residual, relu);
  return p.declined.empty() ? p.implementation : "";
}

}  // namespace cnn::kernels::cpu
