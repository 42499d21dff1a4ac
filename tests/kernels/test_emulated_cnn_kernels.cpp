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

CNN_EMULATED_TEST_CASE("batch norm: statistics, forward with each activation, backward reduce and input gradient",
                       "batch_norm2d") {
  for (DType dt : kFloatTypes) {
    const DType acc = accumulate_dtype(dt);
    // 700 rows: more than one split of partial sums; 40 channels: two channel tiles, one partial.
    const int64_t m = 700, c = 40;
    const Buffer x = random_buffer(dt, m * c, 1, -3, 3), dy = random_buffer(dt, m * c, 2), res = random_buffer(dt, m * c, 3);
    const Buffer weight = random_buffer(acc, c, 4, 0.5, 1.5), bias = random_buffer(acc, c, 5);
    std::vector<uint8_t> workspace(emu::batch_norm_workspace_bytes(m, c));
    Buffer mean_cpu(acc, c), var_cpu(acc, c), mean_emu(acc, c), var_emu(acc, c);
    cpu::batch_norm_stats(dt, x.data(), m, c, mean_cpu.data(), var_cpu.data());
    emu::batch_norm_stats(dt, x.data(), m, c, mean_emu.data(), var_emu.data(), workspace.data(), nullptr);
    expect_close(mean_emu, mean_cpu, "batch norm mean", m);
    expect_close(var_emu, var_cpu, "batch norm variance", m);
    // invstd from the CPU statistics, so both backends normalise with identical values.
    Buffer invstd(acc, c);
    {
      const std::vector<double> v = var_cpu.values();
      std::vector<double> inv(v.size());
      for (size_t i = 0; i < v.size(); ++i) inv[i] = 1.0 / std::sqrt(v[i] + 1e-5);
      cpu::cast(DType::f64, inv.data(), acc, invstd.data(), c);
    }
    for (BatchNormActivation act : {BatchNormActivation::none, BatchNormActivation::relu, BatchNormActivation::add_relu}) {
      const void* r = act == BatchNormActivation::add_relu ? res.data() : nullptr;
      Buffer y_cpu(dt, m * c), y_emu(dt, m * c);
      cpu::batch_norm_forward(dt, x.data(), m, c, mean_cpu.data(), invstd.data(), weight.data(), bias.data(), r, act,
                              y_cpu.data());
      emu::batch_norm_forward(dt, x.data(), m, c, mean_cpu.data(), invstd.data(), weight.data(), bias.data(), r, act,
                              y_emu.data(), nullptr, nullptr);
      expect_close(y_emu, y_cpu, "batch norm forward");
      const void* y = act == BatchNormActivation::none ? nullptr : y_cpu.data();
      Buffer s1_cpu(acc, c), s2_cpu(acc, c), s1_emu(acc, c), s2_emu(acc, c);
      cpu::batch_norm_backward_reduce(dt, dy.data(), y, x.data(), m, c, mean_cpu.data(), invstd.data(), act,
                                      s1_cpu.data(), s2_cpu.data());
      emu::batch_norm_backward_reduce(dt, dy.data(), y, x.data(), m, c, mean_cpu.data(), invstd.data(), act,
                                      s1_emu.data(), s2_emu.data(), workspace.data(), nullptr);
      expect_close(s1_emu, s1_cpu, "batch norm sum(dz)", m);
      expect_close(s2_emu, s2_cpu, "batch norm sum(dz * xhat)", m);
      for (bool training : {true, false}) {
        Buffer dx_cpu(dt, m * c), dx_emu(dt, m * c), dr_cpu(dt, m * c), dr_emu(dt, m * c);
        cpu::batch_norm_backward_input(dt, dy.data(), y, x.data(), m, c, mean_cpu.data(), invstd.data(), weight.data(),
                                       s1_cpu.data(), s2_cpu.data(), training, act, dx_cpu.data(), dr_cpu.data());
        emu::batch_norm_backward_input(dt, dy.data(), y, x.data(), m, c, mean_cpu.data(), invstd.data(), weight.data(),
                                       s1_cpu.data(), s2_cpu.data(), training, act, dx_emu.data(), dr_emu.data(), nullptr,
                                       nullptr);
        expect_close(dx_emu, dx_cpu, "batch norm input gradient");
        expect_close(dr_emu, dr_cpu, "batch norm residual gradient");
      }
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
