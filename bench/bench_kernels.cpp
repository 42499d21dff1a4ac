// bench_kernels: time, bytes moved and achieved bandwidth of the custom bandwidth-bound kernels at
// ResNet-50 shapes (channels-last), through the kernels' dispatch entry points (CNN_KERNEL).
//
//   bench_kernels [--device cpu|cuda[:N]] [--batch B] [--dtype f16|bf16|f32] [--repeats R] [--warmup W]
//                 [--only SUBSTRING[,SUBSTRING...]] [--json OUT]
//
// Kernels: BatchNorm statistics, normalise (+relu), backward reduction and input gradient at each
// BatchNorm shape of ResNet-50 (C = 64 at 112x112 down to C = 2048 at 7x7); column sums (a conv
// bias gradient, sum over N*H*W of [N*H*W, C]); relu, residual add; max-pool 3x3/2 and the global
// average pool; softmax cross-entropy over 1000 classes; loss-scale unscale + inf/nan check and the
// fused AdamW step over ResNet-50's 25.6M parameters.
//
// Bytes moved is what the kernel must read and write at least, stated per case (n elements of
// s = sizeof(dtype) bytes): e.g. BatchNorm statistics n*s, normalise 2*n*s, backward input
// 3*n*s + n*s; per-channel and per-block partial results are left out (under 1%). GB/s = bytes /
// median time. On CUDA the table also gives % of the device's peak DRAM bandwidth, computed as
// memory clock (kHz) * 2 (double data rate) * bus width (bits) / 8 from cudaDeviceGetAttribute
// (cudaDevAttrMemoryClockRate, cudaDevAttrGlobalMemoryBusWidth: CUDA 13 dropped those fields from
// cudaDeviceProp). On the CPU the same kernels run through the CPU backend, for timing only; use a
// small --batch there.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/cnn.h"
#include "kernels/batch_norm.h"
#include "kernels/batch_norm_pool.h"
#include "kernels/elementwise.h"
#include "kernels/loss_scale.h"
#include "kernels/optimizer.h"
#include "kernels/pool.h"
#include "kernels/reduce.h"
#include "kernels/softmax.h"
#include "median_time.h"

#if CNN_WITH_CUDA
#include <cuda_runtime.h>
#endif

using namespace cnn;
using cnn::bench::median_seconds;

namespace {

struct Options {
  Device device;
  int64_t batch = 0;  // 0: 256 on CUDA, 2 on the CPU
  DType dtype = DType::f16;
  int repeats = 10, warmup = 3;
  std::string only, json = "bench_kernels.json";
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr, "bench_kernels: %s\nusage: bench_kernels [--device cpu|cuda[:N]] [--batch B] [--dtype f16|bf16|f32] "
               "[--repeats R] [--warmup W] [--only SUBSTRING[,SUBSTRING...]] [--json OUT]\n", problem.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") usage("times the bandwidth-bound kernels");
    if (i + 1 >= argc) usage("missing value after " + flag);
    const std::string v = argv[++i];
    try {
      if (flag == "--device") o.device = Device::parse(v);
      else if (flag == "--batch") o.batch = std::stoll(v);
      else if (flag == "--dtype") o.dtype = parse_dtype(v);
      else if (flag == "--repeats") o.repeats = std::stoi(v);
      else if (flag == "--warmup") o.warmup = std::stoi(v);
      else if (flag == "--only") o.only = v;
      else if (flag == "--json") o.json = v;
      else usage("unknown option " + flag);
    } catch (const std::logic_error&) {
      usage("bad value '" + v + "' for " + flag);
    }
  }
  if (o.batch == 0) o.batch = o.device.is_cuda() ? 256 : 2;
  if (o.batch < 1 || o.repeats < 1) usage("--batch and --repeats must be at least 1");
  if (o.dtype != DType::f16 && o.dtype != DType::bf16 && o.dtype != DType::f32) usage("--dtype is f16, bf16 or f32");
  return o;
}

// Peak DRAM bandwidth in bytes per second, 0 when unknown (the CPU).
double peak_bandwidth([[maybe_unused]] const Device& device) {
#if CNN_WITH_CUDA
  if (!device.is_cuda()) return 0;
  int clock_khz = 0, bus_bits = 0;
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device.index) != cudaSuccess ||
      cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device.index) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return static_cast<double>(clock_khz) * 1e3 * 2.0 * static_cast<double>(bus_bits) / 8.0;
#else
  return 0;
#endif
}

struct Result {
  std::string name, shape, bytes_formula;
  double seconds = 0, bytes = 0;
};

// The benchmark cases, each a closure over tensors on the device.
class Bench {
 public:
  explicit Bench(const Options& o) : opt_(o), s_(dtype_size(o.dtype)), acc_(accumulate_dtype(o.dtype)) {}

  void run_all() {
    batch_norm_cases();
    column_sum_cases();
    elementwise_cases();
    pooling_cases();
    cross_entropy_case();
    optimizer_cases();
  }
  const std::vector<Result>& results() const { return results_; }

 private:
  Tensor random(const Shape& shape, DType dt, double low = -1, double high = 1) {
    return Tensor::uniform(shape, low, high, ++seed_, dt, opt_.device);
  }
  Tensor empty(const Shape& shape, DType dt) { return Tensor::empty(shape, dt, opt_.device); }
  // --only: a case runs when its "name shape" holds any of the comma-separated substrings.
  bool selected(const std::string& name_and_shape) const {
    if (opt_.only.empty()) return true;
    size_t begin = 0;
    while (begin <= opt_.only.size()) {
      const size_t end = std::min(opt_.only.find(',', begin), opt_.only.size());
      const std::string part = opt_.only.substr(begin, end - begin);
      if (!part.empty() && name_and_shape.find(part) != std::string::npos) return true;
      begin = end + 1;
    }
    return false;
  }
  void* workspace(size_t bytes, Tensor& holder) {
    if (opt_.device.is_cpu() || bytes == 0) return nullptr;
    holder = Tensor::empty({static_cast<int64_t>(bytes)}, DType::u8, opt_.device);
    return holder.data();
  }
  void sync() const {
    if (opt_.device.is_cuda()) cuda::synchronize(opt_.device.index);
  }

  // Times fn and records the case; `elements` x `bytes_per_element` is the traffic.
  void time(const std::string& name, const std::string& shape, const std::string& formula, double bytes,
            const std::function<void()>& fn) {
    if (!selected(name + " " + shape)) return;
    Result r{name, shape, formula, median_seconds(fn, [&] { sync(); }, opt_.warmup, opt_.repeats), bytes};
    results_.push_back(r);
    std::fprintf(stderr, ".");
  }

  // A first stage in inference, compact_cnn's (28x28x1 -> 32, 3x3 pad 1, BatchNorm, ReLU, 2x2 max
  // pool) at 128 images per --batch: the op conv2d_batch_norm_relu_max_pool2d, whose CPU kernel never
  // stores the convolution's output, against the ops it stands for (the library's convolution, then
  // bn_relu_max_pool_forward). Ops, with their outputs allocated, as the model runs them.
  void first_stage_case() {
    const DType dt = opt_.dtype;
    const int64_t n = 128 * opt_.batch, hw = 28, c = 32;
    const Tensor x = random({n, hw, hw, 1}, dt), w = random({c, 3, 3, 1}, dt);
    const Tensor stats = random({c}, acc_, 0.5, 1.5), weight = random({c}, acc_, 0.5, 1.5), bias = random({c}, acc_);
    Conv2dOptions conv;
    conv.pad_h = conv.pad_w = 1;
    const Pool2dOptions pool;
    const double in = static_cast<double>(n * hw * hw) * s_, mid = in * c, out = mid / 4;
    const std::string shape = nhwc(n, hw, 1) + "->" + std::to_string(c) + " 3x3";
    NoGrad no_grad;
    time("conv_bn_relu_max_pool_eval", shape, "in*s + out*s", in + out, [&] {
      conv2d_batch_norm_relu_max_pool2d(x, w, Tensor(), conv, weight, bias, stats, stats, 1e-5, pool);
    });
    time("conv_then_bn_relu_max_pool", shape, "in*s + 2*mid*s + out*(s+4)", in + 2 * mid + out * (s_ + 4) / s_, [&] {
      batch_norm_relu_max_pool2d(conv2d(x, w, Tensor(), conv), weight, bias, stats, stats, false, 0.0, 1e-5, pool);
    });
  }

  static std::string nhwc(int64_t n, int64_t hw, int64_t c) {
    return std::to_string(n) + "x" + std::to_string(hw) + "x" + std::to_string(hw) + "x" + std::to_string(c);
  }

  // The distinct BatchNorm shapes of ResNet-50 (spatial size, channels).
  static std::vector<std::pair<int64_t, int64_t>> batch_norm_shapes() {
    return {{112, 64}, {56, 64}, {56, 256}, {28, 128}, {28, 512}, {14, 256}, {14, 1024}, {7, 512}, {7, 2048}};
  }

  void batch_norm_cases() {
    const DType dt = opt_.dtype;
    for (auto [hw, c] : batch_norm_shapes()) {
      const int64_t m = opt_.batch * hw * hw, n = m * c;
      const double bytes = static_cast<double>(n) * s_;
      const std::string shape = nhwc(opt_.batch, hw, c);
      const Tensor x = random({m, c}, dt), dy = random({m, c}, dt), y = empty({m, c}, dt), dx = empty({m, c}, dt);
      const Tensor mean = empty({c}, acc_), var = empty({c}, acc_), invstd = empty({c}, acc_);
      const Tensor weight = random({c}, acc_, 0.5, 1.5), bias = random({c}, acc_);
      const Tensor s1 = empty({c}, acc_), s2 = empty({c}, acc_);
      Tensor ws_holder;
      size_t ws_bytes = 0;
      if (opt_.device.is_cuda()) CNN_IF_CUDA(ws_bytes = kernels::cuda::batch_norm_workspace_bytes(dt, m, c));
      void* ws = workspace(ws_bytes, ws_holder);
      const Device d = opt_.device;
      time("bn_stats", shape, "n*s", bytes, [&] {
        CNN_KERNEL(d, batch_norm_stats, dt, x.data(), m, c, mean.data(), var.data(), ws);
      });
      CNN_KERNEL(d, batch_norm_update_stats, acc_, mean.data(), var.data(), c, m, nullptr, 0.1, 1e-5, invstd.data(),
                 nullptr, nullptr);
      time("bn_normalise_relu", shape, "2*n*s", 2 * bytes, [&] {
        CNN_KERNEL(d, batch_norm_forward, dt, x.data(), m, c, mean.data(), invstd.data(), weight.data(), bias.data(),
                   nullptr, BatchNormActivation::relu, y.data(), nullptr);
      });
      // As the batch_norm2d op runs them: the CPU takes the relu mask from x where it can (no read of y).
      const bool mask_from_x = d.is_cpu() && kernels::cpu::batch_norm_mask_from_input(dt, BatchNormActivation::relu);
      const void* y_read = mask_from_x ? nullptr : y.data();
      const double y_bytes = mask_from_x ? 0.0 : bytes;
      time("bn_backward_reduce", shape, mask_from_x ? "2*n*s (dy, x)" : "3*n*s (dy, x, y)", 2 * bytes + y_bytes, [&] {
        CNN_KERNEL(d, batch_norm_backward_reduce, dt, dy.data(), y_read, x.data(), m, c, mean.data(), invstd.data(),
                   weight.data(), bias.data(), BatchNormActivation::relu, s1.data(), s2.data(), ws);
      });
      time("bn_backward_input", shape, mask_from_x ? "3*n*s (dy, x; dx)" : "4*n*s (dy, x, y; dx)", 3 * bytes + y_bytes,
           [&] {
             CNN_KERNEL(d, batch_norm_backward_input, dt, dy.data(), y_read, x.data(), m, c, mean.data(),
                        invstd.data(), weight.data(), bias.data(), s1.data(), s2.data(), true,
                        BatchNormActivation::relu, dx.data(), nullptr, nullptr);
           });
    }
  }

  void middle_sum(const std::string& name, const std::string& shape, const Tensor& in, Tensor& out, int64_t outer,
                  int64_t mid, int64_t inner, double scale) {
    const DType dt = in.dtype();
    Tensor ws_holder;
    size_t ws_bytes = 0;
    if (opt_.device.is_cuda())
      CNN_IF_CUDA(ws_bytes = kernels::cuda::reduce_middle_sum_workspace_bytes(dt, outer, mid, inner));
    void* ws = workspace(ws_bytes, ws_holder);
    const Device d = opt_.device;
    time(name, shape, "n*s", static_cast<double>(in.numel()) * dtype_size(dt), [&] {
      CNN_KERNEL(d, reduce_middle_sum, dt, in.data(), out.data(), outer, mid, inner, scale, ws);
    });
  }

  // Conv bias gradients: sum(dy.reshape({N*H*W, C}), 0) at the conv outputs of ResNet-50.
  void column_sum_cases() {
    for (auto [hw, c] : std::vector<std::pair<int64_t, int64_t>>{{112, 64}, {56, 256}, {28, 512}, {14, 1024}, {7, 2048}}) {
      const int64_t m = opt_.batch * hw * hw;
      const Tensor dy = random({m, c}, opt_.dtype);
      Tensor out = empty({c}, opt_.dtype);
      middle_sum("column_sum", nhwc(opt_.batch, hw, c), dy, out, 1, m, c, 1.0);
    }
  }

  void elementwise_cases() {
    const DType dt = opt_.dtype;
    const Device d = opt_.device;
    for (auto [hw, c] : std::vector<std::pair<int64_t, int64_t>>{{112, 64}, {56, 256}, {7, 2048}}) {
      const int64_t n = opt_.batch * hw * hw * c;
      const double bytes = static_cast<double>(n) * s_;
      const Tensor a = random({n}, dt), b = random({n}, dt), y = empty({n}, dt), g = random({n}, dt);
      const std::string shape = nhwc(opt_.batch, hw, c);
      time("relu_forward", shape, "2*n*s", 2 * bytes,
           [&] { CNN_KERNEL(d, unary_forward, UnaryOp::relu, dt, a.data(), y.data(), n, 0.0, 0.0); });
      time("relu_backward", shape, "3*n*s", 3 * bytes,
           [&] { CNN_KERNEL(d, unary_backward, UnaryOp::relu, dt, a.data(), g.data(), y.data(), n, 0.0); });
      time("add", shape, "3*n*s", 3 * bytes, [&] {
        CNN_KERNEL(d, binary_forward, BinaryOp::add, dt, a.data(), BroadcastIndex{}, b.data(), BroadcastIndex{}, y.data(), n);
      });
    }
  }

  void pooling_cases() {
    const DType dt = opt_.dtype;
    const Device d = opt_.device;
    kernels::PoolGeometry g;  // the stem's max-pool: 3x3, stride 2, padding 1, 112 -> 56
    g.n = opt_.batch;
    g.h = g.w = 112;
    g.c = 64;
    g.oh = g.ow = 56;
    g.kh = g.kw = 3;
    g.stride_h = g.stride_w = 2;
    g.pad_h = g.pad_w = 1;
    const int64_t in = g.n * g.h * g.w * g.c, out = g.n * g.oh * g.ow * g.c;
    const Tensor x = random({in}, dt), y = empty({out}, dt), dy = random({out}, dt), dx = empty({in}, dt);
    const Tensor argmax = empty({out}, DType::i32);
    const std::string shape = nhwc(g.n, 112, 64) + " 3x3/2";
    time("max_pool_forward", shape, "in*s + out*(s+4)", static_cast<double>(in) * s_ + static_cast<double>(out) * (s_ + 4),
         [&] { CNN_KERNEL(d, max_pool2d_forward, dt, g, x.data(), y.data(), argmax.data_as<int32_t>()); });
    time("max_pool_backward", shape, "out*(s+4) + in*s", static_cast<double>(out) * (s_ + 4) + static_cast<double>(in) * s_,
         [&] { CNN_KERNEL(d, max_pool2d_backward, dt, g, dy.data(), argmax.data_as<int32_t>(), dx.data()); });
    // VGG's 2x2/2 pools (112 -> 56 here), and their BatchNorm + ReLU + max-pool forward as one CPU
    // kernel (f32/f64) against the normalise (bn_normalise_relu at 8x112x112x64) and max_pool_forward
    // rows it replaces: x read once, no y. (Overlapping windows, like the stem's, run the two kernels.)
    // On these preallocated, cache-warm buffers the two kernels can come out ahead; the op's own
    // comparison, with y allocated as a training step does, is tests/engine/test_batch_norm_pool.cpp's
    // subject for values and bench_train's for time.
    kernels::PoolGeometry g2 = g;
    g2.kh = g2.kw = 2;
    g2.pad_h = g2.pad_w = 0;
    const std::string shape2 = nhwc(g.n, 112, 64) + " 2x2/2";
    time("max_pool_forward", shape2, "in*s + out*(s+4)", static_cast<double>(in) * s_ + static_cast<double>(out) * (s_ + 4),
         [&] { CNN_KERNEL(d, max_pool2d_forward, dt, g2, x.data(), y.data(), argmax.data_as<int32_t>()); });
    if (d.is_cpu() && kernels::cpu::batch_norm_mask_from_input(dt, BatchNormActivation::relu)) {
      const Tensor stats = random({g.c}, acc_, 0.5, 1.5), weight = random({g.c}, acc_, 0.5, 1.5),
                   bias = random({g.c}, acc_);
      time("bn_relu_max_pool_forward", shape2, "in*s + out*(s+4)",
           static_cast<double>(in) * s_ + static_cast<double>(out) * (s_ + 4), [&] {
             CNN_CPU_KERNEL(batch_norm_relu_max_pool_forward, dt, g2, x.data(), stats.data(), stats.data(),
                            weight.data(), bias.data(), y.data(), argmax.data_as<int32_t>());
           });
      // Its backward: the two BatchNorm passes with the pool's gather inside (x, dy and argmax read
      // by each), against max_pool_backward (2x2) and the bn_backward_reduce/input rows.
      const Tensor sum_dz = empty({g.c}, acc_), sum_dz_xhat = empty({g.c}, acc_);
      CNN_CPU_KERNEL(max_pool2d_forward, dt, g2, x.data(), y.data(), argmax.data_as<int32_t>());
      time("max_pool_backward", shape2, "out*(s+4) + in*s",
           static_cast<double>(out) * (s_ + 4) + static_cast<double>(in) * s_,
           [&] { CNN_KERNEL(d, max_pool2d_backward, dt, g2, dy.data(), argmax.data_as<int32_t>(), dx.data()); });
      time("bn_relu_max_pool_backward", shape2, "2*(in*s + out*(s+4)) + in*s",
           2 * (static_cast<double>(in) * s_ + static_cast<double>(out) * (s_ + 4)) + static_cast<double>(in) * s_,
           [&] {
             CNN_CPU_KERNEL(batch_norm_relu_max_pool_backward_reduce, dt, g2, dy.data(), argmax.data_as<int32_t>(),
                            x.data(), stats.data(), stats.data(), weight.data(), bias.data(), sum_dz.data(),
                            sum_dz_xhat.data());
             CNN_CPU_KERNEL(batch_norm_relu_max_pool_backward_input, dt, g2, dy.data(), argmax.data_as<int32_t>(),
                            x.data(), stats.data(), stats.data(), weight.data(), bias.data(), sum_dz.data(),
                            sum_dz_xhat.data(), true, dx.data());
           });
      first_stage_case();
    }
    // Global average pool: mean over the 7x7 positions of [N, 49, 2048].
    const Tensor features = random({opt_.batch, 49, 2048}, dt);
    Tensor pooled = empty({opt_.batch, 2048}, dt);
    middle_sum("global_avg_pool", nhwc(opt_.batch, 7, 2048), features, pooled, opt_.batch, 49, 2048, 1.0 / 49);
  }

  void cross_entropy_case() {
    const DType dt = opt_.dtype;
    const Device d = opt_.device;
    const int64_t rows = opt_.batch, cols = 1000;
    const Tensor logits = random({rows, cols}, dt, -5, 5), logp = empty({rows, cols}, acc_), loss = empty({rows}, acc_);
    const Tensor grad = empty({rows, cols}, dt);
    std::vector<int64_t> host_labels(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) host_labels[static_cast<size_t>(r)] = (r * 37) % cols;
    const Tensor labels = Tensor::from_vector(host_labels, {rows}).to(d);
    kernels::CrossEntropyTargets t;
    t.labels = labels.data_as<int64_t>();
    t.smoothing = 0.1;
    Tensor gloss = Tensor::full({1}, 1.0, acc_, d);
    const std::string shape = std::to_string(rows) + "x1000";
    const double n = static_cast<double>(rows * cols);
    time("cross_entropy_forward", shape, "n*s + n*4 (logp)", n * (s_ + 4),
         [&] { CNN_KERNEL(d, cross_entropy_forward, dt, logits.data(), t, logp.data(), loss.data(), rows, cols); });
    time("cross_entropy_backward", shape, "n*4 + n*s", n * (s_ + 4), [&] {
      CNN_KERNEL(d, cross_entropy_backward, dt, logp.data(), t, gloss.data(), 1.0 / static_cast<double>(rows),
                 grad.data(), rows, cols);
    });
  }

  // One parameter group of ResNet-50's size (25.6M f32 master weights, gradients in the compute
  // dtype), as a single slot: the loss-scale unscale + inf/nan check and the AdamW step.
  void optimizer_cases() {
    const Device d = opt_.device;
    const int64_t n = 25'557'032;
    const DType grad_dtype = opt_.dtype;
    const Tensor param = random({n}, DType::f32), grad = random({n}, grad_dtype), m1 = random({n}, DType::f32);
    const Tensor m2 = random({n}, DType::f32, 0, 1);
    kernels::MultiTensorSlot slot;
    slot.param = param.data_as<float>();
    slot.grad = grad.data();
    slot.state1 = m1.data_as<float>();
    slot.state2 = m2.data_as<float>();
    slot.numel = n;
    const kernels::MultiTensorSlot* slots = &slot;  // both backends read the table from host memory
    const Tensor partials = empty({2 * kernels::kLossScaleMaxBlocks}, DType::f32), result = empty({2}, DType::f32);
    const double gs = dtype_size(grad_dtype);
    // A scale other than 1 reads and writes back every gradient; alternating 1/2 and 2 keeps the values.
    bool halve = false;
    time("unscale_and_check", "25.6M grads", "2*n*g (read, write back)", 2.0 * static_cast<double>(n) * gs, [&] {
      halve = !halve;
      CNN_KERNEL(d, unscale_and_check, slots, 1, n, grad_dtype, halve ? 0.5f : 2.0f, nullptr, partials.data_as<float>(),
                 result.data_as<float>());
    });
    kernels::AdamWArgs args;
    args.lr = 1e-9f;  // keep the weights in range over the repeats
    args.weight_decay = 0.05f;
    args.grad_dtype = grad_dtype;
    time("adamw_step", "25.6M params", "n*(3*4 read + 3*4 written) + n*g", static_cast<double>(n) * (24 + gs),
         [&] { CNN_KERNEL(d, optimizer_step, slots, 1, n, args); });
  }

  const Options& opt_;
  uint64_t seed_ = 0;
  const int s_;
  const DType acc_;
  std::vector<Result> results_;
};

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  try {
    if (opt.device.is_cuda()) cuda::require_device(opt.device.index);
    Bench bench(opt);
    bench.run_all();
    std::fprintf(stderr, "\n");
    const double peak = peak_bandwidth(opt.device);
    std::printf("bench_kernels on %s, %s, batch %lld%s\n", opt.device.str().c_str(), dtype_name(opt.dtype),
                static_cast<long long>(opt.batch),
                peak > 0 ? (", peak DRAM bandwidth " + std::to_string(static_cast<int>(peak / 1e9)) + " GB/s").c_str() : "");
    std::printf("%-24s %-22s %10s %10s %9s %7s  %s\n", "kernel", "shape", "time ms", "MB moved", "GB/s", "% peak",
                "bytes formula (s = dtype size, g = grad dtype size)");
    nlohmann::json cases = nlohmann::json::array();
    for (const Result& r : bench.results()) {
      const double gbs = r.bytes / r.seconds / 1e9;
      char pct[16] = "-";
      if (peak > 0) std::snprintf(pct, sizeof pct, "%.1f", 100.0 * r.bytes / r.seconds / peak);
      std::printf("%-24s %-22s %10.3f %10.1f %9.1f %7s  %s\n", r.name.c_str(), r.shape.c_str(), r.seconds * 1e3,
                  r.bytes / 1e6, gbs, pct, r.bytes_formula.c_str());
      nlohmann::json c = {{"kernel", r.name}, {"shape", r.shape}, {"seconds", r.seconds}, {"bytes", r.bytes},
                          {"bytes_formula", r.bytes_formula}, {"gb_per_s", gbs}};
      if (peak > 0) c["percent_of_peak"] = 100.0 * r.bytes / r.seconds / peak;
      cases.push_back(c);
    }
    const nlohmann::json out = {{"device", opt.device.str()}, {"dtype", dtype_name(opt.dtype)}, {"batch", opt.batch},
                                {"repeats", opt.repeats}, {"peak_bytes_per_s", peak}, {"cases", cases}};
    std::ofstream(opt.json) << out.dump(2) << "\n";
    std::printf("wrote %s\n", opt.json.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_kernels: %s\n", e.what());
    return 1;
  }
  return 0;
}
