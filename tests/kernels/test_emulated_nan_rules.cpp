// PyTorch's NaN rule of the maximum (kernels/common/max_math.h) in the CUDA kernels, run under the
// host emulation: a NaN in a pooling window or along the reduced axis makes the maximum NaN and
// takes the argmax (so the gradient), the first NaN and the first of equal values winning, also
// when the candidates meet in a shared-memory tree. Rows are wider than a block (64 threads under
// emulation), so the per-thread scans and the tree both see NaNs.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "emulation_test_support.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/half.h"
#include "kernels/pool.h"
#include "kernels/reduce.h"
#include "kernels/softmax.h"

using namespace cnn;
using namespace cnn::testing;
namespace emu = cnn::kernels::cuda;

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Sets element i of a buffer to v (rounded to its dtype).
void set(Buffer& b, int64_t i, double v) {
  dispatch_floating(b.dt, "set", [&](auto tag) {
    using T = decltype(tag);
    static_cast<T*>(b.data())[i] = from_compute<T>(static_cast<compute_t<T>>(v));
  });
}
}  // namespace

TEST_CASE("max over the last axis: NaN wins at its first index, through the per-thread scans and the tree") {
  for (DType dt : kFloatTypes) {
    INFO(dtype_name(dt));
    const int64_t rows = 6, cols = 300;
    Buffer x = random_buffer(dt, rows * cols, 31);
    set(x, 0 * cols + 250, kNaN);  // row 0: NaNs owned by two threads, the later one met first in the tree
    set(x, 0 * cols + 200, kNaN);
    set(x, 0 * cols + 5, 9.0);
    set(x, 1 * cols + 0, kNaN);  // row 1: NaN in the first column (every thread's starting value)
    set(x, 1 * cols + 130, kNaN);
    set(x, 2 * cols + 299, kNaN);  // row 2: NaN in the last column only
    set(x, 3 * cols + 10, 5.0);    // row 3: no NaN, a tie between threads 10 and 290 % 64
    set(x, 3 * cols + 290, 5.0);
    for (int64_t c = 0; c < cols; ++c) set(x, 4 * cols + c, -kInf);  // row 4: -inf and one NaN
    set(x, 4 * cols + 77, kNaN);
    set(x, 5 * cols + 64, kNaN);  // row 5: two NaNs owned by the same thread
    set(x, 5 * cols + 128, kNaN);
    Buffer values(dt, rows);
    std::vector<int64_t> indices(rows, -1);
    emu::max_last(dt, x.data(), values.data(), indices.data(), rows, cols, nullptr);
    CHECK(indices == std::vector<int64_t>{200, 0, 299, 10, 77, 64});
    const std::vector<double> v = values.values();
    for (int64_t r : {0, 1, 2, 4, 5}) CHECK(std::isnan(v[static_cast<size_t>(r)]));
    CHECK(v[3] == 5.0);
    // The gradient goes to the NaN's position.
    Buffer gy(dt, rows), gx(dt, rows * cols);
    for (int64_t r = 0; r < rows; ++r) set(gy, r, static_cast<double>(r + 1));
    emu::max_last_backward(dt, gy.data(), indices.data(), gx.data(), rows, cols, nullptr);
    const std::vector<double> g = gx.values();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        CHECK(g[static_cast<size_t>(r * cols + c)] == (c == indices[static_cast<size_t>(r)] ? r + 1.0 : 0.0));
  }
}

TEST_CASE("max pooling: a NaN in a window gives NaN there and takes that window's gradient") {
  for (DType dt : kFloatTypes) {
    INFO(dtype_name(dt));
    // One 4x4 image, two channels, 2x2 windows with stride 2 (as in the CPU test of tests/engine).
    kernels::PoolGeometry g;
    g.n = 1;
    g.h = g.w = 4;
    g.c = 2;
    g.kh = g.kw = 2;
    g.stride_h = g.stride_w = 2;
    g.oh = g.ow = 2;
    Buffer x(dt, 32);
    for (int p = 0; p < 16; ++p) {
      set(x, 2 * p, p);
      set(x, 2 * p + 1, (p % 4) / 2);  // ties in every window
    }
    set(x, 2 * 5, kNaN);   // top-left window
    set(x, 2 * 11, kNaN);  // bottom-right window: the first NaN in row-major order
    set(x, 2 * 14, kNaN);
    set(x, 2 * 15, -kInf);
    Buffer y(dt, 8);
    std::vector<int32_t> argmax(8, -1);
    emu::max_pool2d_forward(dt, g, x.data(), y.data(), argmax.data(), nullptr);
    const std::vector<double> v = y.values();
    CHECK(std::isnan(v[0]));
    CHECK(std::isnan(v[6]));
    CHECK(v[2] == 7);
    CHECK(v[4] == 13);
    CHECK(v[1] == 0);
    CHECK(v[3] == 1);
    CHECK(v[5] == 0);
    CHECK(v[7] == 1);
    CHECK(argmax == std::vector<int32_t>{5, 0, 7, 2, 13, 8, 11, 10});
    Buffer dy(dt, 8), dx(dt, 32);
    for (int i = 0; i < 8; ++i) set(dy, i, i + 1);
    emu::max_pool2d_backward(dt, g, dy.data(), argmax.data(), dx.data(), nullptr);
    std::vector<double> want(32, 0.0);
    for (int i = 0; i < 8; ++i) want[static_cast<size_t>(2 * argmax[static_cast<size_t>(i)] + i % 2)] = i + 1;
    CHECK(dx.values() == want);
  }
}

TEST_CASE("softmax and cross-entropy: a NaN makes its row NaN and leaves the other rows alone") {
  for (DType dt : kFloatTypes) {
    INFO(dtype_name(dt));
    const DType acc = accumulate_dtype(dt);
    const int64_t rows = 3, cols = 300;
    Buffer x = random_buffer(dt, rows * cols, 32, -4, 4);
    set(x, 1 * cols + 150, kNaN);
    Buffer y(dt, rows * cols);
    emu::softmax_forward(dt, x.data(), y.data(), rows, cols, false, nullptr);
    const std::vector<double> s = y.values();
    for (int64_t i = 0; i < rows * cols; ++i) CHECK(std::isnan(s[static_cast<size_t>(i)]) == (i / cols == 1));
    std::vector<int64_t> labels = {3, 4, 5};
    kernels::CrossEntropyTargets t;
    t.labels = labels.data();
    Buffer logp(acc, rows * cols), loss(acc, rows);
    emu::cross_entropy_forward(dt, x.data(), t, logp.data(), loss.data(), rows, cols, nullptr);
    const std::vector<double> l = loss.values();
    CHECK(std::isfinite(l[0]));
    CHECK(std::isnan(l[1]));
    CHECK(std::isfinite(l[2]));
  }
}
