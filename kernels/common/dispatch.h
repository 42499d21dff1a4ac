// Calls f with a value of the C++ storage type that matches a floating DType, or fails with the
// one message for a dtype that is not floating.
#pragma once
#include "kernels/common/dtype.h"
#include "kernels/common/error.h"

namespace cnn {

// The error of a kernel handed a dtype it has no floating type for.
[[noreturn]] inline void fail_not_floating(const char* kernel, DType dt) {
  CNN_FAIL(kernel, ": dtype ", dtype_name(dt), " is not a floating type; use f32, f64, f16 or bf16 (cast first)");
}

template <class F>
void dispatch_floating(DType dt, const char* kernel, F&& f) {
  switch (dt) {
    case DType::f32: f(float{}); return;
    case DType::f64: f(double{}); return;
    case DType::f16: f(half{}); return;
    case DType::bf16: f(bfloat16{}); return;
    default: fail_not_floating(kernel, dt);
  }
}

}  // namespace cnn
