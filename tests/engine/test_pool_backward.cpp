// The CPU average-pool backward takes each input pixel's covering outputs from exact ranges worked
// out once per call (kernels/cpu/pool_loops.h). Checked here against the plainest definition, every
// output's window tested for the pixel in row-major order, which sums the same terms in the same
// order: the same bits, for padded, ceil-mode, overlapping, gapped and adaptive windows.
#include <doctest/doctest.h>

#include <array>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/common/pool_math.h"
#include "kernels/pool.h"

using namespace cnn;
namespace k = cnn::kernels;

namespace {
int64_t pooled_size(int64_t in, int kernel, int stride, int pad, bool ceil_mode) {
  int64_t out = (in + 2 * pad - kernel + (ceil_mode ? stride - 1 : 0)) / stride + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;  // the last window must start inside
  return out;
}

template <class T>
std::vector<T> brute_force_backward(const k::PoolGeometry& g, const std::vector<T>& dy) {
  std::vector<T> dx(static_cast<size_t>(g.n * g.h * g.w * g.c));
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t iy = 0; iy < g.h; ++iy)
      for (int64_t ix = 0; ix < g.w; ++ix)
        for (int64_t c = 0; c < g.c; ++c) {
          T acc = 0;
          for (int64_t oy = 0; oy < g.oh; ++oy)
            for (int64_t ox = 0; ox < g.ow; ++ox) {
              const PoolWindow win = pool_window(g, oy, ox);
              if (!pool_window_contains(win, iy, ix)) continue;
              acc += dy[static_cast<size_t>(((n * g.oh + oy) * g.ow + ox) * g.c + c)] / static_cast<T>(win.divisor);
            }
          dx[static_cast<size_t>(((n * g.h + iy) * g.w + ix) * g.c + c)] = acc;
        }
  return dx;
}

template <class T>
void check_same_bits(const k::PoolGeometry& g, DType dt) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-3, 3);
  std::vector<T> dy(static_cast<size_t>(g.n * g.oh * g.ow * g.c));
  for (T& v : dy) v = static_cast<T>(u(rng));
  std::vector<T> dx(static_cast<size_t>(g.n * g.h * g.w * g.c));
  k::cpu::avg_pool2d_backward(dt, g, dy.data(), dx.data());
  const std::vector<T> want = brute_force_backward(g, dy);
  CHECK(std::memcmp(dx.data(), want.data(), dx.size() * sizeof(T)) == 0);
}
}  // namespace

TEST_CASE("CPU average-pool backward: the same bits as testing every window, for every kind of window") {
  struct Case {
    int64_t h, w;
    int kernel, stride, pad;
    bool ceil_mode, include_pad;
  };
  const Case cases[] = {{7, 6, 3, 2, 1, false, true},  {7, 6, 3, 2, 1, false, false}, {8, 9, 3, 2, 1, true, true},
                        {8, 9, 3, 2, 1, true, false},  {9, 7, 2, 2, 0, true, true},   {10, 10, 2, 3, 0, false, true},
                        {6, 11, 4, 1, 2, false, false}, {5, 5, 5, 1, 2, true, true},   {13, 4, 3, 3, 1, true, false}};
  for (const Case& t : cases) {
    CAPTURE(t.h);
    CAPTURE(t.w);
    CAPTURE(t.kernel);
    CAPTURE(t.stride);
    CAPTURE(t.pad);
    CAPTURE(t.ceil_mode);
    k::PoolGeometry g;
    g.n = 2;
    g.h = t.h;
    g.w = t.w;
    g.c = 3;
    g.kh = g.kw = t.kernel;
    g.stride_h = g.stride_w = t.stride;
    g.pad_h = g.pad_w = t.pad;
    g.count_include_pad = t.include_pad;
    g.oh = pooled_size(t.h, t.kernel, t.stride, t.pad, t.ceil_mode);
    g.ow = pooled_size(t.w, t.kernel, t.stride, t.pad, t.ceil_mode);
    check_same_bits<float>(g, DType::f32);
    check_same_bits<double>(g, DType::f64);
  }
  for (const auto [h, w, oh, ow] : {std::array<int64_t, 4>{7, 6, 3, 4}, {5, 13, 5, 3}, {9, 9, 4, 7}, {3, 3, 5, 5}}) {
    k::PoolGeometry g;
    g.n = 2;
    g.h = h;
    g.w = w;
    g.c = 3;
    g.oh = oh;
    g.ow = ow;
    g.adaptive = true;
    check_same_bits<float>(g, DType::f32);
    check_same_bits<double>(g, DType::f64);
  }
}
