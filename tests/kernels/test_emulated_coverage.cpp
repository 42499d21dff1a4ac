// Every public op of engine/ops.h has its custom CUDA kernels run under emulation by one of the
// emulated tests (CNN_EMULATED_TEST_CASE names the ops each covers), or is listed below with the
// reason it has none. The emulated tests work on raw buffers (kernels::cpu::X against the emulated
// kernels::cuda::X) without the engine, so they cannot run the op table's functions over tensors;
// this check ties them to the same list of ops instead.
#include <doctest/doctest.h>

#include "emulation_test_support.h"
#include "op_list.h"

using namespace cnn::testing;

namespace {
// Ops whose main work is a library call, with nothing of it to emulate; the agreement cases test
// them on a device. Their custom parts are covered by the tests named.
const std::map<std::string, std::string> kNoEmulatedTest = {
    {"matmul", "cuBLAS GEMM (kernels/cuda/gemm.cpp)"},
    {"linear", "cuBLAS GEMM; its bias is an expand_middle, tested with the middle-axis sums"},
    {"conv2d", "cuDNN (kernels/cuda/conv_cudnn.cpp); its bias add is a binary kernel, tested with those"},
    {"batch_norm_relu_max_pool2d", "on CUDA the batch_norm2d and max_pool2d kernels in turn, tested with those; "
                                   "its fused forward and backward kernels are CPU-only"},
    {"conv2d_batch_norm_relu_max_pool2d", "on CUDA conv2d then batch_norm_relu_max_pool2d, tested with those; its "
                                          "fused inference kernel is CPU-only"},
    {"conv2d_batch_norm2d", "on CUDA conv2d then batch_norm2d, tested with those; the folded convolution is "
                            "oneDNN's, on the CPU only"},
};
}  // namespace

TEST_CASE("every public op has an emulated kernel test or a stated reason why not") {
  const std::set<std::string> ops = public_ops();
  REQUIRE(ops.size() >= 30);  // the declarations were found
  for (const std::string& op : ops) {
    INFO(op << ": name it in the CNN_EMULATED_TEST_CASE that runs its kernels, or add it to kNoEmulatedTest");
    CHECK(emulated_ops().count(op) + kNoEmulatedTest.count(op) == 1);
  }
  for (const auto& [op, tests] : emulated_ops()) {
    INFO(op << " (named by " << *tests.begin() << ") is not a public op of engine/ops.h");
    CHECK(ops.count(op) == 1);
  }
  for (const auto& [op, reason] : kNoEmulatedTest) {
    INFO(op << " (" << reason << ") is not a public op of engine/ops.h");
    CHECK(ops.count(op) == 1);
  }
}
