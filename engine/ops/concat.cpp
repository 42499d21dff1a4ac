// concat_channels: joins tensors along the last axis (channels in NHWC) with strided row copies;
// the backward copies each input's columns back out of the gradient.
#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/ops/op_checks.h"
#include "engine/tape.h"
#include "kernels/regularize.h"

namespace cnn {

namespace {
void copy_cols(const Tensor& src, int64_t src_ld, int64_t src_offset, Tensor& dst, int64_t dst_ld, int64_t dst_offset,
               int64_t rows, int64_t cols) {
  CNN_KERNEL(src.device(), copy_columns, src.dtype(), src.data(), src_ld, src_offset, dst.data(), dst_ld, dst_offset,
             rows, cols);
}
}  // namespace

Tensor concat_channels(const std::vector<Tensor>& xs) {
  CNN_CHECK(!xs.empty(), "concat_channels: no tensors to concatenate");
  const Tensor& first = xs[0];
  op_checks::floating("concat_channels", first);
  std::vector<int64_t> widths;
  int64_t total = 0;
  for (const Tensor& t : xs) {
    op_checks::same_device_dtype("concat_channels", first, t);
    CNN_CHECK(t.dim() == first.dim() && t.dim() >= 1, "concat_channels: ", describe(t), " and ", describe(first),
              " differ in rank");
    for (int a = 0; a + 1 < t.dim(); ++a)
      CNN_CHECK(t.size(a) == first.size(a), "concat_channels: ", describe(t), " and ", describe(first),
                " differ outside the last axis");
    widths.push_back(t.size(-1));
    total += t.size(-1);
  }
  std::vector<int64_t> dims = first.shape().to_vector();
  dims.back() = total;
  Tensor y = Tensor::empty(Shape(dims), first.dtype(), first.device());
  const int64_t rows = total ? y.numel() / total : 0;
  int64_t offset = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    copy_cols(xs[i], widths[i], 0, y, total, offset, rows, widths[i]);
    offset += widths[i];
  }
  std::vector<Shape> shapes;
  for (const Tensor& t : xs) shapes.push_back(t.shape());
  record_op("concat_channels", xs, {y}, [shapes, widths, total, rows](const std::vector<Tensor>& g) {
    std::vector<Tensor> out;
    int64_t off = 0;
    for (size_t i = 0; i < shapes.size(); ++i) {
      Tensor part = Tensor::empty(shapes[i], g[0].dtype(), g[0].device());
      copy_cols(g[0], total, off, part, widths[i], 0, rows, widths[i]);
      off += widths[i];
      out.push_back(part);
    }
    return out;
  });
  return y;
}

}  // namespace cnn
