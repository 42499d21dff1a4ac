// Conversion between dtypes. Between floating types it is differentiable: the gradient is cast
// back to the input's dtype. Integer conversions are not recorded.
#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/tape.h"
#include "kernels/elementwise.h"

namespace cnn {

Tensor cast(const Tensor& x, DType dtype) {
  CNN_CHECK(x.defined(), "cast: the input is an undefined tensor");
  if (x.dtype() == dtype) return x;
  Tensor y = Tensor::empty(x.shape(), dtype, x.device());
  const DType from = x.dtype();
  CNN_KERNEL(x.device(), cast, from, x.data(), dtype, y.data(), x.numel());
  if (is_floating(from) && is_floating(dtype))
    record_op("cast", {x}, {y}, [from](const std::vector<Tensor>& g) -> std::vector<Tensor> { return {cast(g[0], from)}; });
  return y;
}

}  // namespace cnn
