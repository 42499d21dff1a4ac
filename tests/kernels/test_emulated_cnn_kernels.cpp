// The CNN kernels of kernels/cuda (batch norm, pooling, dropout, drop-path, column copies) under
// host emulation, compared with the CPU reference on small shapes for each floating dtype.
#include <doctest/doctest.h>

#include <cstring>

#include "emulation_test_support.h"
#include "kernels/batch_norm.h"
#include "kernels/pool.h"
#include "kernels/regularize.h"

using namespace cnn;
using namespace cnn::testing;
namespace emu = cnn::kernels::cuda;

// Batch norm over [M, C]. Shapes: C not a multiple of the channel tile nor of the 16-byte vector
// (7, 40 in f32/f64, 300), C that allows vectors in every dtype (24, 64), tiny M (1 to 3 rows), M not
// a multiple of the row split (701, 3001); and an input one element past a 16-byte boundary, which
// must take the scalar path. The reduction workspace is poisoned with NaN.
namespace {
struct BatchNormShape {
  int64_t m, c;
  int64_t offset = 0;  // elements by which x, dy, y and the outputs start past an aligned address
};

// A buffer of n elements starting `offset` elements into an over-allocated (aligned) one.
struct OffsetBuffer {
  Buffer storage;
  int64_t offset;
  OffsetBuffer(DType dt, int64_t n, int64_t off) : storage(dt, n + off), offset(off) {}
  void* data() { return static_cast<uint8_t*>(storage.data()) + offset * dtype_size(storage.dt); }
  Buffer copy(int64_t n) const {
    Buffer b(storage.dt, n);
    std::memcpy(b.data(), static_cast<const uint8_t*>(storage.data()) + offset * dtype_size(storage.dt),
                static_cast<size_t>(n * dtype_size(storage.dt)));
    return b;
  }
};

OffsetBuffer offset_copy(const Buffer& b, int64_t offset) {
  OffsetBuffer o(b.dt, b.n, offset);
  std::memcpy(o.data(), b.data(), static_cast<size_t>(b.n * dtype_size(b.dt)));
  return o;
}

std::vector<uint8_t> poisoned_workspace(DType dt, int64_t m, int64_t c) {
  return std::vector<uint8_t>(emu::batch_norm_workspace_bytes(dt, m, c), 0xff);  // NaN in float and double
}
}  // namespace

CNN_EMULATED_TEST_CASE("batch norm: statistics, forward with each activation, backward reduce and input gradient",
                       "batch_norm2d") {
  const BatchNormShape shapes[] = {{700, 40}, {701, 24}, {3001, 64}, {300, 300}, {2, 7}, {1, 16}, {3, 1},
                                   {129, 64, 1}, {97, 40, 3}};
  for (DType dt : kFloatTypes) {
    const DType acc = accumulate_dtype(dt);
    for (const BatchNormShape& s : shapes) {
      const int64_t m = s.m, c = s.c, n = m * c;
      INFO("m " << m << ", c " << c << ", offset " << s.offset);
      const Buffer x = random_buffer(dt, n, 1, -3, 3), dy = random_buffer(dt, n, 2), res = random_buffer(dt, n, 3);
      const Buffer weight = random_buffer(acc, c, 4, 0.5, 1.5), bias = random_buffer(acc, c, 5);
      OffsetBuffer xo = offset_copy(x, s.offset), dyo = offset_copy(dy, s.offset), ro = offset_copy(res, s.offset);
      std::vector<uint8_t> workspace = poisoned_workspace(dt, m, c);
      Buffer mean_cpu(acc, c), var_cpu(acc, c), mean_emu(acc, c), var_emu(acc, c);
      cpu::batch_norm_stats(dt, x.data(), m, c, mean_cpu.data(), var_cpu.data());
      emu::batch_norm_stats(dt, xo.data(), m, c, mean_emu.data(), var_emu.data(), workspace.data(), nullptr);
      expect_close(mean_emu, mean_cpu, "batch norm mean", m);
      expect_close(var_emu, var_cpu, "batch norm variance", m);
      // invstd from the CPU statistics, so both backends normalise with identical values.
      Buffer invstd(acc, c);
      cpu::batch_norm_update_stats(acc, nullptr, var_cpu.data(), c, m, nullptr, 0.0, 1e-5, invstd.data(), nullptr,
                                   nullptr);
      for (BatchNormActivation act : {BatchNormActivation::none, BatchNormActivation::relu, BatchNormActivation::add_relu}) {
        const bool with_residual = act == BatchNormActivation::add_relu;
        Buffer y_cpu(dt, n);
        OffsetBuffer y_emu(dt, n, s.offset);
        cpu::batch_norm_forward(dt, x.data(), m, c, mean_cpu.data(), invstd.data(), weight.data(), bias.data(),
                                with_residual ? res.data() : nullptr, act, y_cpu.data());
        emu::batch_norm_forward(dt, xo.data(), m, c, mean_cpu.data(), invstd.data(), weight.data(), bias.data(),
                                with_residual ? ro.data() : nullptr, act, y_emu.data(), nullptr, nullptr);
        expect_close(y_emu.copy(n), y_cpu, "batch norm forward");
        const bool masked = act != BatchNormActivation::none;
        OffsetBuffer yo = offset_copy(y_cpu, s.offset);
        Buffer s1_cpu(acc, c), s2_cpu(acc, c), s1_emu(acc, c), s2_emu(acc, c);
        cpu::batch_norm_backward_reduce(dt, dy.data(), masked ? y_cpu.data() : nullptr, x.data(), m, c, mean_cpu.data(),
                                        invstd.data(), weight.data(), bias.data(), act, s1_cpu.data(), s2_cpu.data());
        workspace = poisoned_workspace(dt, m, c);
        emu::batch_norm_backward_reduce(dt, dyo.data(), masked ? yo.data() : nullptr, xo.data(), m, c, mean_cpu.data(),
                                        invstd.data(), weight.data(), bias.data(), act, s1_emu.data(), s2_emu.data(), workspace.data(), nullptr);
        expect_close(s1_emu, s1_cpu, "batch norm sum(dz)", m);
        expect_close(s2_emu, s2_cpu, "batch norm sum(dz * xhat)", m);
        for (bool training : {true, false}) {
          Buffer dx_cpu(dt, n), dr_cpu(dt, n);
          OffsetBuffer dx_emu(dt, n, s.offset), dr_emu(dt, n, s.offset);
          cpu::batch_norm_backward_input(dt, dy.data(), masked ? y_cpu.data() : nullptr, x.data(), m, c, mean_cpu.data(),
                                         invstd.data(), weight.data(), bias.data(), s1_cpu.data(), s2_cpu.data(), training, act,
                                         dx_cpu.data(), dr_cpu.data());
          emu::batch_norm_backward_input(dt, dyo.data(), masked ? yo.data() : nullptr, xo.data(), m, c, mean_cpu.data(),
                                         invstd.data(), weight.data(), bias.data(), s1_cpu.data(), s2_cpu.data(), training, act,
                                         dx_emu.data(), dr_emu.data(), nullptr, nullptr);
          expect_close(dx_emu.copy(n), dx_cpu, "batch norm input gradient");
          expect_close(dr_emu.copy(n), dr_cpu, "batch norm residual gradient");
        }
      }
    }
  }
}

// One pass of Welford merged with Chan's formula keeps the variance of values far from zero, which
// a float sum of squares would lose entirely (1000 +- 1: sum x^2 / M - mean^2 cancels 6 digits).
CNN_EMULATED_TEST_CASE("batch norm statistics stay accurate for a large mean and many rows", "batch_norm2d") {
  const int64_t m = 20000, c = 8;
  for (DType dt : {DType::f32, DType::f64}) {
    Buffer x = random_buffer(dt, m * c, 6, 999.0, 1001.0);
    std::vector<uint8_t> workspace = poisoned_workspace(dt, m, c);
    Buffer mean_cpu(dt, c), var_cpu(dt, c), mean_emu(dt, c), var_emu(dt, c);
    cpu::batch_norm_stats(dt, x.data(), m, c, mean_cpu.data(), var_cpu.data());
    emu::batch_norm_stats(dt, x.data(), m, c, mean_emu.data(), var_emu.data(), workspace.data(), nullptr);
    const std::vector<double> got = var_emu.values(), want = var_cpu.values();
    for (int64_t ch = 0; ch < c; ++ch) {
      CHECK(want[ch] == doctest::Approx(1.0 / 3).epsilon(0.02));  // uniform on a width of 2
      CHECK(got[ch] == doctest::Approx(want[ch]).epsilon(dt == DType::f32 ? 1e-5 : 1e-12));
    }
    expect_close(mean_emu, mean_cpu, "batch norm mean", 1);
  }
}

// Running statistics (PyTorch's momentum, unbiased variance) and invstd, with the batch count given
// per channel (SyncBN) or as m.
CNN_EMULATED_TEST_CASE("batch norm running-statistics update matches the CPU bit for bit", "batch_norm2d") {
  const int64_t c = 300, m = 50;
  for (DType acc : {DType::f32, DType::f64}) {
    const Buffer mean = random_buffer(acc, c, 7), var = random_buffer(acc, c, 8, 0.1, 3.0);
    Buffer count(acc, c);
    cpu::fill(acc, count.data(), c, 4.0 * m);
    for (bool per_channel_count : {false, true}) {
      Buffer rm_cpu = random_buffer(acc, c, 9), rv_cpu = random_buffer(acc, c, 10, 0.5, 2.0);
      Buffer rm_emu = rm_cpu, rv_emu = rv_cpu, inv_cpu(acc, c), inv_emu(acc, c);
      const void* n = per_channel_count ? count.data() : nullptr;
      cpu::batch_norm_update_stats(acc, mean.data(), var.data(), c, m, n, 0.1, 1e-5, inv_cpu.data(), rm_cpu.data(),
                                   rv_cpu.data());
      emu::batch_norm_update_stats(acc, mean.data(), var.data(), c, m, n, 0.1, 1e-5, inv_emu.data(), rm_emu.data(),
                                   rv_emu.data(), nullptr);
      CHECK(same_bits(inv_cpu.bytes, inv_emu.bytes));
      CHECK(same_bits(rm_cpu.bytes, rm_emu.bytes));
      CHECK(same_bits(rv_cpu.bytes, rv_emu.bytes));
      // PyTorch's formula, in double, for channel 0.
      const double count0 = per_channel_count ? 4.0 * m : m;
      const double rv0 = 0.9 * random_buffer(acc, c, 10, 0.5, 2.0).values()[0] + 0.1 * var.values()[0] * count0 / (count0 - 1);
      CHECK(rv_cpu.values()[0] == doctest::Approx(rv0).epsilon(1e-6));
    }
  }
}

CNN_EMULATED_TEST_CASE("pooling: max with argmax, average with and without padding, adaptive, forward and backward",
                       "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d") {
  kernels::PoolGeometry base;
  base.n = 2;
  base.h = 7;
  base.w = 6;
  base.c = 5;
  std::vector<kernels::PoolGeometry> geometries;
  kernels::PoolGeometry g = base;
  g.kh = g.kw = 3;
  g.stride_h = g.stride_w = 2;
  g.pad_h = g.pad_w = 1;
  g.oh = 4;
  g.ow = 3;
  geometries.push_back(g);
  g.count_include_pad = false;
  geometries.push_back(g);
  kernels::PoolGeometry a = base;
  a.adaptive = true;
  a.oh = 3;
  a.ow = 4;
  geometries.push_back(a);
  for (DType dt : kFloatTypes) {
    for (const kernels::PoolGeometry& pg : geometries) {
      const int64_t in = pg.n * pg.h * pg.w * pg.c, out = pg.n * pg.oh * pg.ow * pg.c;
      const Buffer x = random_buffer(dt, in, 10), dy = random_buffer(dt, out, 11);
      Buffer y_cpu(dt, out), y_emu(dt, out), dx_cpu(dt, in), dx_emu(dt, in);
      cpu::avg_pool2d_forward(dt, pg, x.data(), y_cpu.data());
      emu::avg_pool2d_forward(dt, pg, x.data(), y_emu.data(), nullptr);
      expect_close(y_emu, y_cpu, "avg pool forward");
      cpu::avg_pool2d_backward(dt, pg, dy.data(), dx_cpu.data());
      emu::avg_pool2d_backward(dt, pg, dy.data(), dx_emu.data(), nullptr);
      expect_close(dx_emu, dx_cpu, "avg pool backward");
      std::vector<int32_t> arg_cpu(static_cast<size_t>(out)), arg_emu(static_cast<size_t>(out));
      cpu::max_pool2d_forward(dt, pg, x.data(), y_cpu.data(), arg_cpu.data());
      emu::max_pool2d_forward(dt, pg, x.data(), y_emu.data(), arg_emu.data(), nullptr);
      expect_close(y_emu, y_cpu, "max pool forward");
      CHECK(arg_emu == arg_cpu);
      cpu::max_pool2d_backward(dt, pg, dy.data(), arg_cpu.data(), dx_cpu.data());
      emu::max_pool2d_backward(dt, pg, dy.data(), arg_cpu.data(), dx_emu.data(), nullptr);
      expect_close(dx_emu, dx_cpu, "max pool backward");
    }
  }
}

CNN_EMULATED_TEST_CASE("dropout, drop-path, column copies and transposes match the CPU bit for bit", "dropout",
                       "drop_path", "concat_channels", "transpose_last2") {
  for (DType dt : kFloatTypes) {
    const int64_t n = 900;
    const Buffer x = random_buffer(dt, n, 20);
    const size_t bytes = static_cast<size_t>(n * dtype_size(dt));
    Buffer a(dt, n), b(dt, n);
    cpu::dropout(dt, x.data(), a.data(), n, 0.3, 42, 1000);
    emu::dropout(dt, x.data(), b.data(), n, 0.3, 42, 1000, nullptr);
    CHECK(std::memcmp(a.data(), b.data(), bytes) == 0);
    cpu::drop_path(dt, x.data(), a.data(), 30, 30, 0.5, 42, 7);
    emu::drop_path(dt, x.data(), b.data(), 30, 30, 0.5, 42, 7, nullptr);
    CHECK(std::memcmp(a.data(), b.data(), bytes) == 0);
    // The seed derived on the device from a step seed (MaskSeed with `from`): the masks of the
    // seed derived on the host, on both backends.
    const uint64_t step_seed = 987654321;
    Buffer c(dt, n);
    for (bool per_row : {false, true}) {
      if (per_row) {
        cpu::drop_path(dt, x.data(), a.data(), 30, 30, 0.5, derive_seed(step_seed, 5), 7);
        cpu::drop_path(dt, x.data(), b.data(), 30, 30, 0.5, MaskSeed(5, &step_seed), 7);
        emu::drop_path(dt, x.data(), c.data(), 30, 30, 0.5, MaskSeed(5, &step_seed), 7, nullptr);
      } else {
        cpu::dropout(dt, x.data(), a.data(), n, 0.3, derive_seed(step_seed, 5), 1000);
        cpu::dropout(dt, x.data(), b.data(), n, 0.3, MaskSeed(5, &step_seed), 1000);
        emu::dropout(dt, x.data(), c.data(), n, 0.3, MaskSeed(5, &step_seed), 1000, nullptr);
      }
      CHECK(std::memcmp(a.data(), b.data(), bytes) == 0);
      CHECK(std::memcmp(a.data(), c.data(), bytes) == 0);
    }
    cpu::dropout(dt, x.data(), a.data(), n, 0.3, MaskSeed(5, &step_seed), 1000);
    cpu::dropout(dt, x.data(), b.data(), n, 0.3, MaskSeed(6, &step_seed), 1000);
    CHECK(std::memcmp(a.data(), b.data(), bytes) != 0);  // another module's index: another mask
    Buffer wide_cpu(dt, 30 * 50), wide_emu(dt, 30 * 50);
    cpu::fill(dt, wide_cpu.data(), 30 * 50, 0.0);
    cpu::fill(dt, wide_emu.data(), 30 * 50, 0.0);
    cpu::copy_columns(dt, x.data(), 30, 0, wide_cpu.data(), 50, 20, 30, 30);
    emu::copy_columns(dt, x.data(), 30, 0, wide_emu.data(), 50, 20, 30, 30, nullptr);
    CHECK(std::memcmp(wide_cpu.data(), wide_emu.data(), static_cast<size_t>(30 * 50 * dtype_size(dt))) == 0);
    Buffer t_cpu(dt, n), t_emu(dt, n);
    cpu::transpose_batched(dt, x.data(), t_cpu.data(), 3, 20, 15);
    emu::transpose_batched(dt, x.data(), t_emu.data(), 3, 20, 15, nullptr);
    CHECK(std::memcmp(t_cpu.data(), t_emu.data(), bytes) == 0);
  }
}
