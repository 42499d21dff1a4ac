// Cached low-precision weights (Module::keep_low_precision_copies): the same outputs and master
// gradients as casting in every forward, bit for bit, without the per-forward casts; the copies follow
// every writer of the masters that the library provides (loading weights), and placement or a new
// compute dtype drops them.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>

#include "engine/cnn.h"
#include "engine/profiler.h"
#include "layers/registry.h"
#include "layers/weights.h"

using namespace cnn;

namespace {
// The batch of a 3-channel 16x16 image model, in the compute dtype's master f32.
Tensor images(int n) { return Tensor::randn({n, 16, 16, 3}, 21); }

struct Pass {
  std::vector<double> logits;
  std::vector<std::vector<double>> grads;  // of the master parameters
  int casts = 0;                           // cast kernels run during the forward
};

Pass forward_backward(Module& model, const Tensor& x) {
  model.zero_grad();
  Tape tape;
  Tensor loss, logits;
  profiler::start();
  {
    Tape::Recording recording(tape);
    logits = model.forward(x);
    loss = sum(cast(logits, DType::f32));
  }
  const profiler::Recording spans = profiler::stop();
  tape.backward(loss);
  Pass pass;
  pass.logits = logits.to_doubles();
  for (const NamedParameter& p : model.named_parameters()) pass.grads.push_back(p.tensor.grad().to_doubles());
  for (const profiler::Span& s : spans.spans) pass.casts += s.category == profiler::Category::op && s.name == "cast";
  return pass;
}

// Whether every kept copy holds its master cast to the compute dtype, bit for bit.
bool copies_match_masters(const Module& model, const std::vector<NamedTensor>& copies) {
  for (const NamedTensor& copy : copies)
    for (const NamedParameter& p : model.named_parameters())
      if (p.name == copy.name && cast(p.tensor, copy.tensor.dtype()).to_doubles() != copy.tensor.to_doubles()) return false;
  return true;
}

int count_weights_cast_where_used(const Module& model) {
  int n = 0;
  for (const NamedParameter& p : model.named_parameters())
    n += p.role != ParamRole::norm_weight && p.role != ParamRole::norm_bias;
  return n;
}
}  // namespace

TEST_CASE("cached low-precision weights: the same logits and master gradients, bit for bit, without the casts") {
  for (const DType dtype : {DType::bf16, DType::f16}) {
    INFO(dtype_name(dtype));
    const auto plain = make_model("cifar_resnet20", 10, 3, 5);
    const auto cached = make_model("cifar_resnet20", 10, 3, 5);
    plain->to(dtype);
    cached->to(dtype);
    const std::vector<NamedTensor> copies = cached->keep_low_precision_copies();
    CHECK(cached->keeps_low_precision_copies());
    CHECK(static_cast<int>(copies.size()) == count_weights_cast_where_used(*cached));  // conv and linear, not BatchNorm
    for (const NamedTensor& copy : copies) CHECK(copy.tensor.dtype() == dtype);

    const Tensor x = images(4);
    const Pass want = forward_backward(*plain, x);
    const Pass got = forward_backward(*cached, x);
    CHECK(got.logits == want.logits);
    CHECK(got.grads == want.grads);
    // The input's and the logits' casts stay; the weights' (one per conv and linear parameter) are gone.
    CHECK(want.casts == 2 + count_weights_cast_where_used(*plain));
    CHECK(got.casts == 2);
    // A second pass (the tape's records of the first are spent) still agrees.
    CHECK(forward_backward(*cached, x).grads == want.grads);
  }
}

TEST_CASE("cached low-precision weights follow loaded weights, placement and dtype changes drop them") {
  const auto source = make_model("cifar_resnet20", 10, 3, 1);
  const auto model = make_model("cifar_resnet20", 10, 3, 2);
  model->to(DType::bf16);
  const std::vector<NamedTensor> copies = model->keep_low_precision_copies();
  const auto path = std::filesystem::temp_directory_path() / ("cnn_test_lp_copies_" + std::to_string(::getpid()) + ".h5");
  save_weights(*source, path);
  load_weights(*model, path);
  std::filesystem::remove(path);
  CHECK(copies_match_masters(*model, copies));
  source->to(DType::bf16);
  CHECK(forward_backward(*model, images(2)).logits == forward_backward(*source, images(2)).logits);

  // A master written by hand goes stale in the copy until refreshed.
  NoGrad no_grad;
  Tensor w = model->named_parameters()[0].tensor;
  w.fill_(0.25);
  CHECK_FALSE(copies_match_masters(*model, copies));
  model->refresh_low_precision_copies();
  CHECK(copies_match_masters(*model, copies));

  model->to(Device::cpu());  // where it is already: nothing moves, the copies stay
  model->to(DType::bf16);
  CHECK(model->keeps_low_precision_copies());
  model->to(DType::f16);  // copies of another dtype would be wrong: dropped
  CHECK_FALSE(model->keeps_low_precision_copies());
  model->keep_low_precision_copies();
  model->set_parameters(model->parameters());
  CHECK_FALSE(model->keeps_low_precision_copies());
  model->to(DType::f32);
  CHECK(model->keep_low_precision_copies().empty());  // f32 compute: nothing to cache
}
