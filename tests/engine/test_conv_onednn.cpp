// oneDNN's CPU convolutions (kernels/cpu/conv_onednn.cpp) against the reference im2col + GEMM path:
// every pass over geometries that cover what the zoo runs (strides, padding that leaves the last
// rows unread, groups, depthwise, dilation, a single input channel), each compared with an f64
// run of the reference and required to be as close to it as the reference's own f32 result is;
// the same in bf16, where both round a sum of exact products to bf16.
#include <doctest/doctest.h>

#include "engine/config.h"

#if CNN_WITH_ONEDNN
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/cnn.h"
#include "engine/profiler.h"
#include "kernels/common/half.h"
#include "kernels/conv.h"
#include "kernels/cpu/conv_onednn.h"

using namespace cnn;
using kernels::ConvDirection;
using kernels::ConvGeometry;

namespace {

struct Case {
  const char* name;
  int64_t n, h, w, c, o, k;
  int stride, pad, dilation, groups;
};

const Case kCases[] = {
    {"3x3, stride 1, pad 1", 2, 9, 9, 16, 24, 3, 1, 1, 1, 1},
    {"3x3, stride 2, pad 1, odd size", 2, 11, 11, 8, 16, 3, 2, 1, 1, 1},
    {"1x1, stride 2 (the last row and column unread)", 2, 8, 8, 16, 32, 1, 2, 0, 1, 1},
    {"1x1, stride 2, odd and rectangular (the last row and column read)", 2, 9, 7, 16, 24, 1, 2, 0, 1, 1},
    {"1x1, stride 3", 1, 10, 11, 8, 8, 1, 3, 0, 1, 1},
    {"1x1, stride 1", 3, 7, 7, 32, 16, 1, 1, 0, 1, 1},
    {"7x7, stride 2, pad 3, 3 channels (a stem)", 1, 20, 20, 3, 8, 7, 2, 3, 1, 1},
    {"3x3 from one channel (compact_cnn's first layer)", 4, 12, 12, 1, 32, 3, 1, 1, 1, 1},
    {"5x5, no padding", 2, 10, 10, 6, 10, 5, 1, 0, 1, 1},
    {"3x3, dilation 2", 2, 12, 12, 8, 8, 3, 1, 2, 2, 1},
    {"3x3, 4 groups", 2, 9, 9, 16, 32, 3, 1, 1, 1, 4},
    {"3x3 depthwise", 2, 10, 10, 16, 16, 3, 1, 1, 1, 16},
    {"5x5 depthwise, stride 2", 2, 13, 13, 24, 24, 5, 2, 2, 1, 24},
    {"3x3, batch 1, rectangular image", 1, 6, 14, 8, 8, 3, 1, 1, 1, 1},
    {"3x3, stride 2, no padding", 2, 9, 9, 4, 4, 3, 2, 0, 1, 1},
};

ConvGeometry geometry_of(const Case& c) {
  return kernels::square_conv_geometry(c.n, c.h, c.w, c.c, c.o, c.k, c.k, c.stride, c.pad, c.dilation, c.groups);
}

std::vector<float> random_values(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(count);
  for (float& x : v) x = u(rng);
  return v;
}

// Values rounded to T (f32 or bf16), and T's values widened to double.
template <class T>
std::vector<T> in_dtype(const std::vector<float>& v) {
  std::vector<T> t(v.size());
  std::transform(v.begin(), v.end(), t.begin(), [](float f) { return from_compute<T>(f); });
  return t;
}
template <class T>
std::vector<double> as_doubles(const std::vector<T>& v) {
  std::vector<double> d(v.size());
  std::transform(v.begin(), v.end(), d.begin(), [](T t) { return static_cast<double>(to_compute(t)); });
  return d;
}

// Sizes of (first, second, out) of a pass, in ConvBuffers order.
std::array<size_t, 3> sizes_of(ConvDirection d, const ConvGeometry& g) {
  const auto x = static_cast<size_t>(g.n * g.h * g.w * g.c), y = static_cast<size_t>(g.n * g.oh * g.ow * g.o),
             w = static_cast<size_t>(g.o * g.kh * g.kw * g.group_in());
  switch (d) {
    case ConvDirection::forward: return {x, w, y};
    case ConvDirection::backward_data: return {y, w, x};
    case ConvDirection::backward_filter: return {x, y, w};
  }
  return {};
}

template <class T>
void reference(ConvDirection d, const ConvGeometry& g, const std::vector<T>& a, const std::vector<T>& b,
               std::vector<T>& out) {
  constexpr DType dt = dtype_of<T>();
  if (d == ConvDirection::forward) kernels::cpu::conv2d_forward(dt, g, a.data(), b.data(), out.data());
  if (d == ConvDirection::backward_data) kernels::cpu::conv2d_backward_data(dt, g, a.data(), b.data(), out.data());
  if (d == ConvDirection::backward_filter) kernels::cpu::conv2d_backward_filter(dt, g, a.data(), b.data(), out.data());
}

const char* name_of(ConvDirection d) {
  return d == ConvDirection::forward ? "forward" : d == ConvDirection::backward_data ? "backward-data" : "backward-filter";
}

// The largest difference from the f64 result of oneDNN's output and of the reference's output, both
// in T (f32 or bf16), from the same inputs in T.
struct Errors {
  double onednn = 0, reference = 0, scale = 0;
  bool ran = false;
};

template <class T = float>
Errors compare(ConvDirection d, const ConvGeometry& g, uint32_t seed) {
  const auto [first_size, second_size, out_size] = sizes_of(d, g);
  const auto in_t = [](const std::vector<float>& v) { return in_dtype<T>(v); };
  const std::vector<T> a = in_t(random_values(first_size, seed)), b = in_t(random_values(second_size, seed + 1));
  std::vector<double> exact(out_size);
  reference(d, g, as_doubles(a), as_doubles(b), exact);
  // theirs starts as NaN: overwritten, not added to.
  std::vector<T> ours(out_size), theirs = in_t(std::vector<float>(out_size, std::numeric_limits<float>::quiet_NaN()));
  reference(d, g, a, b, ours);
  Errors e;
  e.ran = kernels::cpu::onednn_conv2d(d, dtype_of<T>(), g, a.data(), b.data(), theirs.data());
  const std::vector<double> theirs_d = as_doubles(theirs), ours_d = as_doubles(ours);
  for (size_t i = 0; i < out_size; ++i) {
    e.onednn = std::max(e.onednn, std::abs(theirs_d[i] - exact[i]));
    if (std::isnan(theirs_d[i])) e.onednn = std::numeric_limits<double>::infinity();
    e.reference = std::max(e.reference, std::abs(ours_d[i] - exact[i]));
    e.scale = std::max(e.scale, std::abs(exact[i]));
  }
  return e;
}

// check(errors, implementation) for every pass over every geometry in T where oneDNN ran it (a
// declined pass, such as bf16 on a CPU without bf16 code in oneDNN, runs the reference), with the
// geometry, pass and implementation captured.
template <class T, class Check>
void for_every_pass(uint32_t seed, Check check) {
  constexpr DType dt = dtype_of<T>();
  for (const Case& c : kCases) {
    const ConvGeometry g = geometry_of(c);
    for (ConvDirection d : {ConvDirection::forward, ConvDirection::backward_data, ConvDirection::backward_filter}) {
      CAPTURE(c.name);
      CAPTURE(name_of(d));
      const std::string implementation = kernels::cpu::onednn_conv2d_implementation(d, dt, g);
      CAPTURE(implementation);
      const Errors e = compare<T>(d, g, seed += 2);
      CHECK(e.ran == !implementation.empty());
      if (e.ran) check(e, implementation);  // else declined: the reference ran, which other tests cover
    }
  }
}

}  // namespace

TEST_CASE("oneDNN convolutions: every pass agrees with the reference over the zoo's geometries") {
  for_every_pass<float>(100, [](const Errors& e, const std::string&) {
    // As close to the exact result as our own f32 path is, within a factor (another summation
    // order), or within f32 rounding of the output's magnitude.
    CHECK(e.onednn <= std::max(4 * e.reference, 1e-5 * e.scale));
  });
}

TEST_CASE("oneDNN convolutions: the common geometries run JIT code, not oneDNN's reference loops") {
  for (const Case& c : kCases) {
    if (c.groups != 1 || c.dilation != 1) continue;
    const ConvGeometry g = geometry_of(c);
    for (ConvDirection d : {ConvDirection::forward, ConvDirection::backward_data, ConvDirection::backward_filter}) {
      CAPTURE(c.name);
      CAPTURE(name_of(d));
      const std::string implementation = kernels::cpu::onednn_conv2d_implementation(d, DType::f32, g);
      CHECK_FALSE(implementation.empty());
      CHECK(implementation.rfind("ref", 0) != 0);
    }
  }
}

TEST_CASE("oneDNN convolutions: bf16 passes agree with the reference's bf16 over the zoo's geometries") {
  // Both sum exact products of bf16 values in f32 and round once to bf16, so they differ only where
  // the summation orders' f32 sums round to neighbouring bf16 values: by one bf16 step (2^-8
  // relative) of the output's magnitude at most.
  int ran = 0;
  for_every_pass<bfloat16>(300, [&](const Errors& e, const std::string& implementation) {
    ++ran;
    CHECK(implementation.rfind("ref", 0) != 0);
    CHECK(e.onednn <= std::max(2 * e.reference, std::ldexp(1.0, -8) * e.scale));
  });
  MESSAGE("oneDNN ran ", ran, " of the bf16 passes");
}

namespace {
// dx += backward-data(dy, w) by oneDNN against dx + the f64 reference, for every geometry in T:
// taken ones within twice the reference's own error (its backward-data rounded to T, then the add
// rounded to T) or the dtype's rounding of the magnitude; declined ones leave dx as it was. Returns
// the names of the geometries taken.
template <class T>
std::vector<std::string> check_accumulating_backward_data(uint32_t seed, double rounding) {
  constexpr DType dt = dtype_of<T>();
  std::vector<std::string> taken;
  for (const Case& c : kCases) {
    CAPTURE(c.name);
    const ConvGeometry g = geometry_of(c);
    const auto [dy_size, w_size, dx_size] = sizes_of(ConvDirection::backward_data, g);
    const std::vector<T> dy = in_dtype<T>(random_values(dy_size, seed)), w = in_dtype<T>(random_values(w_size, seed + 1)),
                         dx0 = in_dtype<T>(random_values(dx_size, seed + 2));
    seed += 3;
    std::vector<double> exact(dx_size);
    reference(ConvDirection::backward_data, g, as_doubles(dy), as_doubles(w), exact);
    std::vector<T> ours(dx_size);
    reference(ConvDirection::backward_data, g, dy, w, ours);
    const std::string implementation = kernels::cpu::onednn_conv2d_backward_data_accumulate_implementation(dt, g);
    std::vector<T> dx = dx0;
    const bool ran = kernels::cpu::onednn_conv2d_backward_data_accumulate(dt, g, dy.data(), w.data(), dx.data());
    CHECK(ran == !implementation.empty());
    if (!ran) {
      CHECK(std::equal(dx.begin(), dx.end(), dx0.begin(), [](T a, T b) { return to_compute(a) == to_compute(b) ||
                                                                               (std::isnan(to_compute(a)) && std::isnan(to_compute(b))); }));
      continue;
    }
    taken.emplace_back(c.name);
    CHECK(implementation.rfind("ref", 0) != 0);
    double theirs_error = 0, ours_error = 0, scale = 0;
    for (size_t i = 0; i < dx_size; ++i) {
      const double want = double(to_compute(dx0[i])) + exact[i];
      const double our_sum = double(to_compute(from_compute<T>(to_compute(dx0[i]) + to_compute(ours[i]))));
      theirs_error = std::max(theirs_error, std::abs(double(to_compute(dx[i])) - want));
      ours_error = std::max(ours_error, std::abs(our_sum - want));
      scale = std::max(scale, std::abs(want));
    }
    CAPTURE(implementation);
    CHECK(theirs_error <= std::max(2 * ours_error, rounding * scale));
  }
  return taken;
}
}  // namespace

TEST_CASE("oneDNN convolutions: backward-data adds into dx where it is taken, and leaves dx alone where not") {
  // f32: stride-1 ungrouped geometries with a spatial kernel run as the transposed forward with a
  // sum post-op; the rest (1x1, strided, grouped, dilated) are declined, their gradients added
  // separately.
  const auto taken = [](const std::vector<std::string>& names, const char* name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  const std::vector<std::string> f32 = check_accumulating_backward_data<float>(900, 1e-5);
  CHECK(taken(f32, "3x3, stride 1, pad 1"));
  CHECK(taken(f32, "5x5, no padding"));
  CHECK_FALSE(taken(f32, "1x1, stride 1"));
  CHECK_FALSE(taken(f32, "1x1, stride 2 (the last row and column unread)"));
  CHECK_FALSE(taken(f32, "3x3 depthwise"));
  CHECK_FALSE(taken(f32, "3x3, dilation 2"));
  // bf16: the same, and unstrided 1x1 as a matrix product; one rounding to bf16 of the sum.
  const std::vector<std::string> bf16 = check_accumulating_backward_data<bfloat16>(950, std::ldexp(1.0, -8));
  CHECK(taken(bf16, "1x1, stride 1"));
  CHECK_FALSE(taken(bf16, "1x1, stride 2 (the last row and column unread)"));
  MESSAGE("adding backward-data: f32 ", f32.size(), ", bf16 ", bf16.size(), " of ", std::size(kCases), " geometries");
}

TEST_CASE("oneDNN convolutions: other dtypes are declined and left to the reference") {
  const ConvGeometry g = geometry_of(kCases[0]);
  std::vector<double> x(static_cast<size_t>(g.n * g.h * g.w * g.c)), w(static_cast<size_t>(g.o * g.kh * g.kw * g.c)),
      y(static_cast<size_t>(g.n * g.oh * g.ow * g.o), 7.0);
  for (DType dt : {DType::f64, DType::f16}) {
    CHECK_FALSE(kernels::cpu::onednn_conv2d(ConvDirection::forward, dt, g, x.data(), w.data(), y.data()));
    CHECK(kernels::cpu::onednn_conv2d_implementation(ConvDirection::forward, dt, g).empty());
  }
  CHECK(std::all_of(y.begin(), y.end(), [](double v) { return v == 7.0; }));  // untouched
}

TEST_CASE("oneDNN convolutions: a new thread count gets its own primitive and the same results") {
  const ConvGeometry g = geometry_of(kCases[1]);
  const int threads = cpu_threads();
  set_cpu_threads(1);
  const Errors one = compare(ConvDirection::backward_filter, g, 7);
  set_cpu_threads(threads);
  const Errors all = compare(ConvDirection::backward_filter, g, 7);
  REQUIRE(one.ran);
  REQUIRE(all.ran);
  CHECK(one.onednn <= std::max(4 * one.reference, 1e-5 * one.scale));
  CHECK(all.onednn <= std::max(4 * all.reference, 1e-5 * all.scale));
}

namespace {
// The op's results (outputs, gradients) on the reference and on oneDNN agree part by part, within
// f32 rounding of each part's magnitude.
void check_same_results(const std::vector<std::vector<double>>& reference_run,
                        const std::vector<std::vector<double>>& onednn_run) {
  REQUIRE(reference_run.size() == onednn_run.size());
  for (size_t part = 0; part < reference_run.size(); ++part) {
    const std::vector<double>&ref = reference_run[part], &dnnl = onednn_run[part];
    REQUIRE(ref.size() == dnnl.size());
    double worst = 0, scale = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      worst = std::max(worst, std::abs(ref[i] - dnnl[i]));
      scale = std::max(scale, std::abs(ref[i]));
    }
    CAPTURE(part);
    CHECK(worst <= 1e-5 * scale);
  }
}
}  // namespace

TEST_CASE("conv2d: a residual input's second gradient is added by oneDNN's backward-data itself, to the same gradients") {
  // a feeds a 3x3 convolution (recorded first, so its backward runs last) and a product, as a
  // residual block's input feeds its first convolution and the shortcut.
  const CpuConvolutions before = cpu_convolutions();
  Tensor x = Tensor::uniform({2, 7, 7, 16}, -1, 1, 11), w = Tensor::uniform({16, 3, 3, 16}, -1, 1, 12);
  const Tensor r1 = Tensor::uniform({2, 7, 7, 16}, -1, 1, 13), r2 = Tensor::uniform({2, 7, 7, 16}, -1, 1, 14);
  x.requires_grad_();
  w.requires_grad_();
  std::vector<std::vector<double>> results[2];
  size_t adds[2] = {0, 0};
  for (CpuConvolutions choice : {CpuConvolutions::reference, CpuConvolutions::onednn}) {
    set_cpu_convolutions(choice);
    x.zero_grad();
    w.zero_grad();
    Tape tape;
    Tensor loss;
    {
      Tape::Recording recording(tape);
      const Tensor a = mul(x, x);
      const Tensor y = conv2d(a, w, Tensor(), {1, 1, 1, 1, 1, 1, 1});
      loss = add(sum(mul(y, r1)), sum(mul(a, r2)));
    }
    profiler::start();
    tape.backward(loss);
    const profiler::Recording recording = profiler::stop();
    const bool onednn = choice == CpuConvolutions::onednn;
    for (const profiler::Span& span : recording.spans) adds[onednn] += span.name == "binary_forward";
    results[onednn] = {x.grad().to_doubles(), w.grad().to_doubles()};
  }
  set_cpu_convolutions(before);
  CHECK(adds[1] + 1 == adds[0]);  // the add of a's two gradients is gone
  check_same_results(results[0], results[1]);
}

TEST_CASE("cpu_convolutions: the conv2d op runs oneDNN or the reference, with the same results and gradients") {
  const CpuConvolutions before = cpu_convolutions();
  Tensor x = Tensor::uniform({2, 9, 9, 8}, -1, 1, 3), w = Tensor::uniform({12, 3, 3, 8}, -1, 1, 4);
  x.requires_grad_();
  w.requires_grad_();
  std::vector<std::vector<double>> results[2];
  for (CpuConvolutions choice : {CpuConvolutions::reference, CpuConvolutions::onednn}) {
    set_cpu_convolutions(choice);
    CHECK(cpu_convolutions() == choice);
    x.zero_grad();
    w.zero_grad();
    Tape tape;
    Tensor y, loss;
    {
      Tape::Recording recording(tape);
      y = conv2d(x, w, Tensor(), {2, 2, 1, 1, 1, 1, 1});
      loss = sum(mul(y, y));
    }
    tape.backward(loss);
    results[choice == CpuConvolutions::onednn] = {y.to_doubles(), x.grad().to_doubles(), w.grad().to_doubles()};
  }
  set_cpu_convolutions(before);
  check_same_results(results[0], results[1]);
  CHECK(std::string(cpu_convolutions_name(parse_cpu_convolutions("onednn"))) == "onednn");
  CHECK_THROWS_WITH_AS(parse_cpu_convolutions("mkl"), doctest::Contains("not one of onednn, reference"), Error);
}
#endif
