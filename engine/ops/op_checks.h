// Argument checks shared by the op implementations. Each failure is a cnn::Error that names the op
// and describes the offending tensors (shape, dtype, device).
#pragma once
#include "engine/tensor.h"

namespace cnn::op_checks {

inline void defined(const char* op, const Tensor& t, const char* what) {
  CNN_CHECK(t.defined(), op, ": ", what, " is an undefined tensor");
}

inline void floating(const char* op, const Tensor& t) {
  defined(op, t, "input");
  CNN_CHECK(is_floating(t.dtype()), op, ": needs a floating tensor (f32, f64, f16, bf16), got ", describe(t));
}

inline void same_device_dtype(const char* op, const Tensor& a, const Tensor& b) {
  defined(op, a, "first input");
  defined(op, b, "second input");
  CNN_CHECK(a.device() == b.device(), op, ": inputs on different devices: ", describe(a), " and ", describe(b),
            "; move one with .to(device)");
  CNN_CHECK(a.dtype() == b.dtype(), op, ": inputs of different dtypes: ", describe(a), " and ", describe(b),
            "; convert one with .to(dtype)");
}

inline void rank(const char* op, const Tensor& t, int expected, const char* what) {
  CNN_CHECK(t.dim() == expected, op, ": ", what, " must have ", expected, " dimensions, got ", describe(t));
}

}  // namespace cnn::op_checks
