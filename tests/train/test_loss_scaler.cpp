// The dynamic loss scaler (train/loss_scaler.h): growth after clean steps, back-off and skipped
// steps on overflow, unscaling of real gradient tensors (f32 and f16), the fixed and disabled
// modes, state save/restore, and options from a config.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "engine/cnn.h"
#include "train/config/config.h"
#include "kernels/optimizer.h"
#include "train/loss_scaler.h"

using namespace cnn;
using namespace cnn::train;

namespace {
const GradientStats kClean{1.0, 0};
const GradientStats kOverflow{0.0, 3};

LossScalerOptions every_three() {
  LossScalerOptions o;
  o.growth_interval = 3;
  return o;
}
}  // namespace

namespace {
// The device's measurements {sum of squares, inf/nan count} as host figures.
GradientStats stats_of(const Tensor& measured) {
  const std::vector<double> m = measured.to_doubles();
  return {std::sqrt(m[0]), static_cast<int64_t>(m[1])};
}
}  // namespace

TEST_CASE("loss scaler: starts at 2^16, doubles after N clean steps, halves and skips on overflow") {
  LossScaler scaler(every_three());
  CHECK(scaler.scale() == 65536.0);
  CHECK(scaler.update(kClean));
  CHECK(scaler.update(kClean));
  CHECK(scaler.scale() == 65536.0);
  CHECK(scaler.update(kClean));
  CHECK(scaler.scale() == 131072.0);  // third clean step in a row
  CHECK(scaler.update(kClean));
  CHECK(scaler.update(kClean));
  CHECK_FALSE(scaler.update(kOverflow));  // skip this step
  CHECK(scaler.scale() == 65536.0);
  CHECK(scaler.skipped_steps() == 1);
  CHECK(scaler.clean_steps_in_a_row() == 0);  // the count restarts after an overflow
  CHECK(scaler.update(kClean));
  CHECK(scaler.update(kClean));
  CHECK(scaler.scale() == 65536.0);
  CHECK_FALSE(scaler.update(kOverflow));
  CHECK_FALSE(scaler.update(kOverflow));
  CHECK(scaler.scale() == 16384.0);
  CHECK(scaler.skipped_steps() == 3);
}

TEST_CASE("loss scaler: unscales gradients in one pass and finds inf/nan") {
  LossScaler scaler(every_three());
  Tensor a = Tensor::from_vector<float>({3.0f * 65536, 0.0f}, {2});
  Tensor b = Tensor::from_vector<float>({4.0f * 65536}, {1}).to(DType::f16);  // 262144 overflows f16: inf
  Tensor c = Tensor::from_vector<float>({4.0f * 256}, {1}).to(DType::f16);
  GradientStats stats = stats_of(scaler.unscale({a, b}));
  CHECK(stats.non_finite == 1);
  CHECK_FALSE(scaler.update(stats));
  CHECK(a.to_doubles() == std::vector<double>{3.0, 0.0});
  a.copy_(Tensor::from_vector<float>({3.0f * 32768, 0.0f}, {2}));
  c.copy_(Tensor::from_vector<float>({8192.0f}, {1}).to(DType::f16));  // the scale is now 32768
  stats = stats_of(scaler.unscale({a, Tensor(), c}));  // undefined gradients are skipped
  CHECK(stats.finite());
  CHECK(stats.norm == doctest::Approx(std::sqrt(9.0 + 0.0625)));
  CHECK(c.to_doubles() == std::vector<double>{0.25});
  CHECK(scaler.update(stats));
}

TEST_CASE("loss scaler: fixed and disabled modes, state save and restore") {
  LossScalerOptions fixed = every_three();
  fixed.dynamic = false;
  fixed.init_scale = 1024;
  LossScaler f(fixed);
  for (int i = 0; i < 5; ++i) f.update(kClean);
  CHECK_FALSE(f.update(kOverflow));
  CHECK(f.scale() == 1024.0);

  LossScalerOptions off;
  off.enabled = false;
  LossScaler disabled(off);
  CHECK(disabled.scale() == 1.0);
  Tensor g = Tensor::from_vector<float>({2.0f, std::numeric_limits<float>::quiet_NaN()}, {2});
  const GradientStats stats = stats_of(disabled.unscale({g}));
  CHECK(stats.non_finite == 1);
  CHECK_FALSE(disabled.update(stats));  // a NaN step is skipped even without scaling
  CHECK(disabled.scale() == 1.0);
  CHECK(g.to_doubles()[0] == 2.0);

  LossScaler original(every_three());
  original.update(kClean);
  original.update(kOverflow);
  original.update(kClean);
  LossScaler resumed(every_three());
  resumed.load_state(original.state());
  CHECK(resumed.scale() == 32768.0);
  CHECK(resumed.skipped_steps() == 1);
  resumed.update(kClean);
  original.update(kClean);
  resumed.update(kClean);
  original.update(kClean);
  CHECK(resumed.scale() == original.scale());
  CHECK(resumed.scale() == 65536.0);
  CHECK_THROWS_AS(resumed.load_state({1.0}), Error);
}

TEST_CASE("loss scaler options come from [precision], only fp16 scales") {
  const Config fp16 = Config::parse("[precision]\nmode = fp16\ngrowth_interval = 100\ninit_scale = 256\n", "p.ini");
  const LossScalerOptions o = loss_scaler_options(fp16);
  CHECK(o.enabled);
  CHECK(o.growth_interval == 100);
  CHECK(LossScaler(o).scale() == 256.0);
  CHECK_FALSE(loss_scaler_options(Config::parse("[precision]\nmode = bf16\n", "p.ini")).enabled);
}

TEST_CASE("loss scaler: the verdict on the device carries the clip coefficient and gates the optimizer") {
  LossScaler scaler(every_three());
  Tensor g = Tensor::from_vector<float>({3.0f * 65536, 4.0f * 65536}, {2});  // norm 5 once unscaled
  scaler.update(scaler.unscale({g}), /*clip_grad_norm=*/1.0);
  const std::vector<double> control = scaler.control().to_doubles();
  CHECK(control[kernels::kStepControlApply] == 1.0);
  CHECK(control[kernels::kStepControlGradScale] == doctest::Approx(1.0 / (5.0 + 1e-6)));
  CHECK(scaler.read().last_norm == doctest::Approx(5.0));
  CHECK(scaler.scale() == 65536.0);
  Tensor bad = Tensor::from_vector<float>({std::numeric_limits<float>::infinity()}, {1});
  scaler.update(scaler.unscale({bad}), 1.0);
  const ScalerReadout r = scaler.read();
  CHECK_FALSE(r.last_applied);
  CHECK(r.skipped_in_a_row == 1);
  CHECK(r.scale == 32768.0);
  CHECK(scaler.scale_tensor().item() == 32768.0);  // the next backward's seed follows on the device
}
