// The op case table (tests/op_cases.cpp) against the public ops of engine/ops.h: every op has at
// least one gradient check and one CPU-vs-CUDA agreement case, every case names a real op, and
// every agreement case runs on the CPU backend at each of its dtypes (so a case that the GPU
// machine would reject for its shapes or dtypes fails here first).
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <set>

#include "op_cases.h"
#include "op_list.h"

using namespace cnn;
using namespace cnn::testing;

namespace {
// Tensor view methods (engine/tensor.h) with their own gradient cases.
const std::set<std::string> kViewMethods = {"reshape", "slice"};

bool all_finite(const Tensor& t) {
  for (double v : t.to_doubles())
    if (!std::isfinite(v)) return false;
  return true;
}
}  // namespace

TEST_CASE("the public ops are read from engine/ops.h") {
  const std::set<std::string> ops = public_ops();
  CHECK(ops.size() >= 30);
  // One-line, multi-line and pair-returning declarations; not operators, void or non-tensor functions.
  for (const char* op : {"relu", "gelu", "add", "max_last", "conv2d", "batch_norm2d", "cast"}) {
    INFO(op);
    CHECK(ops.count(op) == 1);
  }
  for (const char* not_op : {"add_", "broadcast_shape", "operator"}) {
    INFO(not_op);
    CHECK(ops.count(not_op) == 0);
  }
}

TEST_CASE("every unary op of CNN_UNARY_OPS is a public function of engine/ops.h") {
  const std::set<std::string> ops = public_ops();
  for (const std::string& op : parameterless_unary_ops()) {
    INFO(op);
    CHECK(ops.count(op) == 1);
  }
}

TEST_CASE("every public op has a gradient check and a CPU-vs-CUDA agreement case") {
  std::map<std::string, int> gradchecks, agreements;
  for (const OpCase& c : op_cases()) {
    if (c.gradcheck) ++gradchecks[c.op];
    if (!c.agreement.empty()) ++agreements[c.op];
  }
  for (const std::string& op : public_ops()) {
    INFO(op << ": add its cases to tests/op_cases.cpp");
    CHECK(gradchecks[op] > 0);
    CHECK(agreements[op] > 0);
  }
}

TEST_CASE("every op case names a public op, has a unique name and inputs that fit it") {
  const std::set<std::string> ops = public_ops();
  std::set<std::string> names;
  for (const OpCase& c : op_cases()) {
    INFO(c.name);
    CHECK(names.insert(c.name).second);
    CHECK((ops.count(c.op) == 1 || kViewMethods.count(c.op) == 1));
    CHECK(c.name.find_first_of("*?\\") == std::string::npos);  // doctest's wildcards and escape
    CHECK(c.f);
    CHECK(!c.inputs.empty());
    CHECK((c.gradcheck || !c.agreement.empty()));
    for (const Input& in : c.inputs) CHECK((in.values != Values::away_from_zero || in.low > 0));
  }
}

namespace {
// The CPU half of the agreement test: the case runs at the large shapes in each of its dtypes, its
// output and the gradients of every differentiable input are finite.
void run_on_cpu(const OpCase& c) {
  const HeldSetting setting(c);
  for (const Tolerance& t : c.agreement) {
    INFO(dtype_name(t.dtype));
    std::vector<Tensor> inputs = make_inputs(c, true, t.dtype);
    for (size_t i = 0; i < inputs.size(); ++i)
      if (c.inputs[i].differentiable) inputs[i].requires_grad_();
    Tape tape;
    Tensor y;
    {
      Tape::Recording rec(tape);
      y = c.f(inputs);
    }
    CHECK(all_finite(y));
    tape.backward(y, Tensor::randn(y.shape(), 77, y.dtype()));
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!c.inputs[i].differentiable) continue;
      INFO("gradient of input " << i);
      REQUIRE(inputs[i].grad().defined());
      CHECK(all_finite(inputs[i].grad()));
    }
  }
}
}  // namespace

CNN_OP_TESTS("agreement case on the cpu: ", [](const OpCase& c) { return !c.agreement.empty(); },
             run_on_cpu);
