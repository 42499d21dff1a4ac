// One table of op cases drives the op-level tests, as ggml's tests/test-backend-ops.cpp does: the
// finite-difference gradient check (tests/engine/test_gradcheck_ops.cpp) and the CPU-vs-CUDA
// agreement (tests/gpu/test_agreement.cpp) run every case of the table, each as its own CTest test,
// and tests/engine/test_op_cases.cpp checks that every public op of engine/ops.h has cases in both.
// A case is an op over tensors, how to draw its inputs (a small shape for the gradient check, a
// larger one for the agreement), and its tolerances. The unary ops' cases come from CNN_UNARY_OPS.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "engine/cnn.h"
#include "gradcheck.h"

namespace cnn::testing {

using OpFn = std::function<Tensor(const std::vector<Tensor>&)>;

// How an input's values are drawn (in f64, then rounded to the dtype under test).
enum class Values {
  uniform,         // uniform in [low, high]
  away_from_zero,  // uniform in +-[low, high], 0 < low: for an op with a kink at 0 (relu, abs)
  labels,          // i64 class indices in [0, K), K the last dimension of input 0 (the logits)
  distribution,    // softmax over the last axis of uniform [low, high] values (soft targets)
};

struct Input {
  Shape shape;  // in the gradient check: small, as it runs two forward passes per element
  Shape large;  // in the agreement: several blocks and grid-stride steps of a kernel; rank 0: `shape`
  double low = -1.0, high = 1.0;
  Values values = Values::uniform;
  bool differentiable = true;  // false: held fixed (labels, soft targets, running statistics)
  bool accumulate = false;     // in accumulate_dtype (f32 for f16/bf16 activations): BatchNorm's
                               // parameters and statistics, soft targets
};

// The largest relative difference |cuda - cpu| / (1 + |cpu|) allowed at one dtype.
struct Tolerance {
  DType dtype;
  double max_rel;
};

struct OpCase {
  std::string name;  // unique; the tests are "gradcheck <name>" and "gpu agreement <name>"
  std::string op;    // the public op it exercises: a function of engine/ops.h or a Tensor view method
  OpFn f;
  std::vector<Input> inputs;
  bool gradcheck = true;  // false only where the case says why
  GradCheckOptions gradcheck_options{};
  // The dtypes of the agreement test and their tolerances; empty only where the case says why.
  std::vector<Tolerance> agreement = {{DType::f32, 1e-5}};
  // A process-wide setting held for the whole check (e.g. cuDNN's algorithm search): sets it and
  // returns what restores it. Null: none.
  std::function<std::function<void()>()> setting;
};

const std::vector<OpCase>& op_cases();

// The inputs of a case on the CPU: for the gradient check (`shape`, f64) or for the agreement
// (`large`, in `dtype`). Seeds come from the case's name, so each case draws the same values always.
std::vector<Tensor> make_inputs(const OpCase& c, bool large, DType dtype);
std::vector<bool> differentiable_inputs(const OpCase& c);

// Holds a case's setting for its lifetime.
class HeldSetting {
 public:
  explicit HeldSetting(const OpCase& c);
  ~HeldSetting();
  HeldSetting(const HeldSetting&) = delete;
  HeldSetting& operator=(const HeldSetting&) = delete;

 private:
  std::function<void()> restore_;
};

// Registers one doctest test case "<prefix><case name>" per op case that `select` accepts, running
// `run` on that case, so that CTest lists (and runs in parallel) every case on its own. Call it from
// a namespace-scope initialiser of the test file: CNN_OP_TESTS(prefix, select, run).
bool register_op_tests(const char* prefix, bool (*select)(const OpCase&), void (*run)(const OpCase&),
                       const char* file, int line);
#define CNN_OP_TESTS(prefix, select, run) \
  [[maybe_unused]] static const bool cnn_op_tests_registered_ = \
      ::cnn::testing::register_op_tests(prefix, select, run, __FILE__, __LINE__)

}  // namespace cnn::testing
