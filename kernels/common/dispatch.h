// Calls f with a value of the C++ storage type that matches a floating DType.
#pragma once
#include <stdexcept>
#include <string>

#include "kernels/common/dtype.h"

namespace cnn {

template <class F>
void dispatch_floating(DType dt, const char* kernel, F&& f) {
  switch (dt) {
    case DType::f32: f(float{}); return;
    case DType::f64: f(double{}); return;
    case DType::f16: f(half{}); return;
    case DType::bf16: f(bfloat16{}); return;
    default:
      throw std::logic_error(std::string(kernel) + ": dtype " + dtype_name(dt) + " is not a floating type");
  }
}

}  // namespace cnn
