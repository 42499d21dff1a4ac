// The custom CUDA kernels (kernels/cuda/*.cu) run under the host emulation and compared with the
// CPU reference (kernels/cpu) on small shapes, for each floating dtype. Outputs are poisoned with
// NaN first, so an element a kernel forgets to write fails the comparison. Grids are capped at 3
// blocks under emulation, so sizes above 768 exercise the grid-stride loops.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/reduce.h"
#include "kernels/softmax.h"
#include "emulation_test_support.h"
#include "op_list.h"

using namespace cnn;
using namespace cnn::testing;
namespace emu = cnn::kernels::cuda;


// Every op of CNN_UNARY_OPS and CNN_UNARY_OPS_WITH_ARGUMENTS, on inputs from its domain.
CNN_EMULATED_TEST_CASE("unary kernels, forward and backward, every op", parameterless_unary_ops(), "gelu", "pow",
                       "affine", "scale", "shift") {
  const int64_t n = 1000;
  for (DType dt : kFloatTypes) {
    for (const UnaryEntry& e : unary_entries()) {
      INFO(e.name);
      const auto [low, high] = unary_test_range(e.domain);
      Buffer x = random_buffer(dt, n, 1, low, high);
      if (e.domain == UnaryDomain::kink_at_zero) {  // +-[low, high]: alternate the signs
        std::vector<double> v = x.values();
        for (size_t i = 0; i < v.size(); i += 2) v[i] = -v[i];
        cpu::cast(DType::f64, v.data(), dt, x.data(), n);
      }
      const Buffer gy = random_buffer(dt, n, 2);
      Buffer y_cpu(dt, n), y_emu(dt, n), gx_cpu(dt, n), gx_emu(dt, n);
      cpu::unary_forward(e.op, dt, x.data(), y_cpu.data(), n, 1.5, 0.25);
      emu::unary_forward(e.op, dt, x.data(), y_emu.data(), n, 1.5, 0.25, nullptr);
      expect_close(y_emu, y_cpu, "unary forward");
      cpu::unary_backward(e.op, dt, x.data(), gy.data(), gx_cpu.data(), n, 1.5);
      emu::unary_backward(e.op, dt, x.data(), gy.data(), gx_emu.data(), n, 1.5, nullptr);
      expect_close(gx_emu, gx_cpu, "unary backward");
    }
  }
}

CNN_EMULATED_TEST_CASE("binary kernels with broadcasting, forward and backward", "add", "sub", "mul", "div") {
  struct Case {
    int64_t n;
    BroadcastIndex ia, ib;
    int64_t na, nb;
  };
  // out [2, 5, 3, 4] = 120 elements: same shape; b scalar; b [C]; b [N,1,1,C]; a [C].
  const Case cases[] = {{120, {}, {}, 120, 120},
                        {120, {}, {120, 1}, 120, 1},
                        {120, {}, {30, 4}, 120, 4},
                        {120, {}, {15, 4}, 120, 8},
                        {120, {30, 4}, {}, 4, 120},
                        {900, {}, {900, 1}, 900, 1}};
  for (DType dt : kFloatTypes) {
    for (BinaryOp op : {BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::div}) {
      for (const Case& c : cases) {
        const Buffer a = random_buffer(dt, c.na, 3, 0.5, 2.0), b = random_buffer(dt, c.nb, 4, 0.5, 2.0);
        const Buffer gy = random_buffer(dt, c.n, 5);
        Buffer y_cpu(dt, c.n), y_emu(dt, c.n);
        cpu::binary_forward(op, dt, a.data(), c.ia, b.data(), c.ib, y_cpu.data(), c.n);
        emu::binary_forward(op, dt, a.data(), c.ia, b.data(), c.ib, y_emu.data(), c.n, nullptr);
        expect_close(y_emu, y_cpu, "binary forward");
        Buffer ga_cpu(dt, c.n), gb_cpu(dt, c.n), ga_emu(dt, c.n), gb_emu(dt, c.n);
        cpu::binary_backward(op, dt, a.data(), c.ia, b.data(), c.ib, gy.data(), ga_cpu.data(), gb_cpu.data(), c.n);
        emu::binary_backward(op, dt, a.data(), c.ia, b.data(), c.ib, gy.data(), ga_emu.data(), gb_emu.data(), c.n,
                             nullptr);
        expect_close(ga_emu, ga_cpu, "binary backward (a)");
        expect_close(gb_emu, gb_cpu, "binary backward (b)");
      }
    }
  }
}

CNN_EMULATED_TEST_CASE("cast, fill and random fill match the CPU bit for bit", "cast") {
  const int64_t n = 800;
  const std::pair<DType, DType> pairs[] = {{DType::f32, DType::f16}, {DType::f16, DType::f32},
                                           {DType::f32, DType::bf16}, {DType::bf16, DType::f64},
                                           {DType::f64, DType::f32}, {DType::f32, DType::i32}};
  for (auto [from, to] : pairs) {
    const Buffer x = random_buffer(from, n, 6, -100, 100);
    Buffer y_cpu(to, n), y_emu(to, n);
    cpu::cast(from, x.data(), to, y_cpu.data(), n);
    emu::cast(from, x.data(), to, y_emu.data(), n, nullptr);
    CHECK(std::memcmp(y_cpu.data(), y_emu.data(), static_cast<size_t>(n * dtype_size(to))) == 0);
  }
  for (DType dt : kFloatTypes) {
    Buffer f_cpu(dt, n), f_emu(dt, n);
    cpu::fill(dt, f_cpu.data(), n, 0.1);
    emu::fill(dt, f_emu.data(), n, 0.1, nullptr);
    CHECK(std::memcmp(f_cpu.data(), f_emu.data(), static_cast<size_t>(n * dtype_size(dt))) == 0);
    for (RandomKind kind : {RandomKind::uniform, RandomKind::normal}) {
      Buffer r_cpu(dt, n), r_emu(dt, n);
      cpu::random_fill(dt, r_cpu.data(), n, kind, 1234, 9, 0.0, 1.0);
      emu::random_fill(dt, r_emu.data(), n, kind, 1234, 9, 0.0, 1.0, nullptr);
      CHECK(std::memcmp(r_cpu.data(), r_emu.data(), static_cast<size_t>(n * dtype_size(dt))) == 0);
    }
  }
}

TEST_CASE("the count increment adds one, whatever the count") {
  for (int64_t start : {int64_t{0}, int64_t{41}, (int64_t{1} << 40) + 7}) {
    int64_t on_cpu = start, emulated = start;
    cpu::increment_count(&on_cpu);
    emu::increment_count(&emulated, nullptr);
    emu::increment_count(&emulated, nullptr);
    CHECK(on_cpu == start + 1);
    CHECK(emulated == start + 2);
  }
}

// sum and mean over axes, and global average pooling (a mean over H and W). Column sums over NHWC
// (outer 1, mid N*H*W, inner C) and long rows reduce in two stages: per-split partial sums in a
// workspace (poisoned with NaN here, so a partial that is read but never written fails), then a
// fixed-order pass. Shapes: inner not a multiple of the 32-wide tile, mid not a multiple of the
// split, tiny and large.
CNN_EMULATED_TEST_CASE("middle-axis sums, both kernel shapes, one and two stages, and their expansion", "sum", "mean",
                       "global_avg_pool2d") {
  struct Shape3 {
    int64_t outer, mid, inner;
    bool two_stage;  // whether the emulated grid splits the rows
  };
  const Shape3 shapes[] = {{1, 1000, 1, true},  {5, 77, 1, false},  {2, 50, 70, true},  {1, 7, 33, true},
                           {3, 1, 40, false},   {1, 1, 1, false},   {1, 3001, 70, true}, {1, 2049, 33, true},
                           {2, 999, 5, true},   {1, 20000, 1, true}, {1, 4000, 64, true}};
  for (DType dt : kFloatTypes) {
    for (const Shape3& s : shapes) {
      INFO("[" << s.outer << ", " << s.mid << ", " << s.inner << "]");
      const int64_t n = s.outer * s.mid * s.inner, m = s.outer * s.inner;
      const Buffer x = random_buffer(dt, n, 7);
      Buffer y_cpu(dt, m), y_emu(dt, m);
      const size_t workspace_bytes = emu::reduce_middle_sum_workspace_bytes(dt, s.outer, s.mid, s.inner);
      CHECK((workspace_bytes > 0) == s.two_stage);
      std::vector<uint8_t> workspace(workspace_bytes, 0xff);  // 0xff... is a NaN in float and double
      cpu::reduce_middle_sum(dt, x.data(), y_cpu.data(), s.outer, s.mid, s.inner, 0.5, nullptr);
      emu::reduce_middle_sum(dt, x.data(), y_emu.data(), s.outer, s.mid, s.inner, 0.5,
                             workspace.empty() ? nullptr : workspace.data(), nullptr);
      // Sums in a different order: allow the accumulated rounding of mid terms.
      if (dt == DType::f32) {
        const auto g = y_emu.values(), w = y_cpu.values();
        for (size_t i = 0; i < g.size(); ++i) CHECK(g[i] == doctest::Approx(w[i]).epsilon(1e-5).scale(10));
      } else {
        expect_close(y_emu, y_cpu, "reduce_middle_sum");
      }
      const Buffer g = random_buffer(dt, m, 8);
      Buffer e_cpu(dt, n), e_emu(dt, n);
      cpu::expand_middle(dt, g.data(), e_cpu.data(), s.outer, s.mid, s.inner, 0.25);
      emu::expand_middle(dt, g.data(), e_emu.data(), s.outer, s.mid, s.inner, 0.25, nullptr);
      expect_close(e_emu, e_cpu, "expand_middle");
    }
  }
}

CNN_EMULATED_TEST_CASE("max over the last axis picks the first maximum, and routes its gradient", "max_last") {
  for (DType dt : kFloatTypes) {
    const int64_t rows = 4, cols = 300;
    Buffer x = random_buffer(dt, rows * cols, 9);
    // Ties: row 1 has its maximum at columns 10 and 290.
    cpu::fill(dt, static_cast<uint8_t*>(x.data()) + (1 * cols + 10) * dtype_size(dt), 1, 5.0);
    cpu::fill(dt, static_cast<uint8_t*>(x.data()) + (1 * cols + 290) * dtype_size(dt), 1, 5.0);
    Buffer v_cpu(dt, rows), v_emu(dt, rows);
    std::vector<int64_t> i_cpu(rows), i_emu(rows);
    cpu::max_last(dt, x.data(), v_cpu.data(), i_cpu.data(), rows, cols);
    emu::max_last(dt, x.data(), v_emu.data(), i_emu.data(), rows, cols, nullptr);
    expect_close(v_emu, v_cpu, "max_last values");
    CHECK(i_cpu == i_emu);
    CHECK(i_emu[1] == 10);
    const Buffer gy = random_buffer(dt, rows, 10);
    Buffer gx_cpu(dt, rows * cols), gx_emu(dt, rows * cols);
    cpu::max_last_backward(dt, gy.data(), i_cpu.data(), gx_cpu.data(), rows, cols);
    emu::max_last_backward(dt, gy.data(), i_emu.data(), gx_emu.data(), rows, cols, nullptr);
    expect_close(gx_emu, gx_cpu, "max_last backward");
  }
}

CNN_EMULATED_TEST_CASE("softmax and log-softmax, forward and backward", "softmax", "log_softmax") {
  for (DType dt : kFloatTypes) {
    for (int64_t cols : {10, 300}) {
      for (bool log : {false, true}) {
        const int64_t rows = 5, n = rows * cols;
        const Buffer x = random_buffer(dt, n, 11, -5, 5), gy = random_buffer(dt, n, 12);
        Buffer y_cpu(dt, n), y_emu(dt, n), gx_cpu(dt, n), gx_emu(dt, n);
        cpu::softmax_forward(dt, x.data(), y_cpu.data(), rows, cols, log);
        emu::softmax_forward(dt, x.data(), y_emu.data(), rows, cols, log, nullptr);
        expect_close(y_emu, y_cpu, log ? "log_softmax forward" : "softmax forward");
        cpu::softmax_backward(dt, y_cpu.data(), gy.data(), gx_cpu.data(), rows, cols, log);
        emu::softmax_backward(dt, y_cpu.data(), gy.data(), gx_emu.data(), rows, cols, log, nullptr);
        expect_close(gx_emu, gx_cpu, log ? "log_softmax backward" : "softmax backward");
      }
    }
  }
}

CNN_EMULATED_TEST_CASE("cross-entropy forward and backward: labels, label smoothing, soft targets", "cross_entropy",
                       "cross_entropy_soft") {
  for (DType dt : kFloatTypes) {
    const DType acc = accumulate_dtype(dt);
    const int64_t rows = 6, cols = 270;
    const Buffer logits = random_buffer(dt, rows * cols, 13, -4, 4);
    std::vector<int64_t> labels = {0, 269, 5, 100, 7, 8};
    Buffer soft(acc, rows * cols);
    {
      const Buffer raw = random_buffer(acc, rows * cols, 14, -1, 1);
      cpu::softmax_forward(acc, raw.data(), soft.data(), rows, cols, false);
    }
    Buffer gloss(acc, 1);
    cpu::fill(acc, gloss.data(), 1, 0.7);
    for (int variant = 0; variant < 3; ++variant) {
      kernels::CrossEntropyTargets t;
      if (variant < 2) t.labels = labels.data();
      if (variant == 1) t.smoothing = 0.1;
      if (variant == 2) t.soft = soft.data();
      Buffer lp_cpu(acc, rows * cols), lp_emu(acc, rows * cols), l_cpu(acc, rows), l_emu(acc, rows);
      cpu::cross_entropy_forward(dt, logits.data(), t, lp_cpu.data(), l_cpu.data(), rows, cols);
      emu::cross_entropy_forward(dt, logits.data(), t, lp_emu.data(), l_emu.data(), rows, cols, nullptr);
      expect_close(lp_emu, lp_cpu, "cross-entropy log-probabilities");
      expect_close(l_emu, l_cpu, "cross-entropy row losses");
      Buffer g_cpu(dt, rows * cols), g_emu(dt, rows * cols);
      cpu::cross_entropy_backward(dt, lp_cpu.data(), t, gloss.data(), 1.0 / rows, g_cpu.data(), rows, cols);
      emu::cross_entropy_backward(dt, lp_cpu.data(), t, gloss.data(), 1.0 / rows, g_emu.data(), rows, cols, nullptr);
      expect_close(g_emu, g_cpu, "cross-entropy backward");
    }
  }
}
