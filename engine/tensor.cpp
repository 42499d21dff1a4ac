#include "engine/tensor.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "engine/backend.h"
#include "engine/graph.h"
#include "engine/cuda_context.h"
#include "engine/host_sync_check.h"
#include "engine/ops.h"
#include "engine/tape.h"
#include "kernels/elementwise.h"

namespace cnn {

namespace {
std::atomic<uint64_t> next_tensor_id{1};

std::shared_ptr<TensorImpl> make_impl(std::shared_ptr<Storage> storage, size_t offset, const Shape& shape,
                                      DType dtype) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->offset = offset;
  impl->shape = shape;
  impl->dtype = dtype;
  impl->id = next_tensor_id.fetch_add(1, std::memory_order_relaxed);
  return impl;
}

const TensorImpl& checked(const std::shared_ptr<TensorImpl>& impl) {
  CNN_CHECK(impl != nullptr, "use of an undefined tensor (default-constructed, or a gradient not computed yet)");
  return *impl;
}
}  // namespace

// ---- creation ----

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device, bool pinned) {
  const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  return Tensor(make_impl(std::make_shared<Storage>(bytes, device, pinned), 0, shape, dtype));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0.0, dtype, device); }
Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_(value);
  return t;
}

namespace {
Tensor random_tensor(const Shape& shape, RandomKind kind, double a, double b, uint64_t seed, DType dtype,
                     Device device) {
  CNN_CHECK(is_floating(dtype), "random tensors are floating point; got dtype ", dtype_name(dtype));
  Tensor t = Tensor::empty(shape, dtype, device);
  constexpr uint64_t kStream = 0x7e45u;  // the stream id of Tensor::randn/uniform draws
  CNN_KERNEL(device, random_fill, dtype, t.data(), t.numel(), kind, seed, kStream, a, b);
  return t;
}
}  // namespace

Tensor Tensor::randn(const Shape& shape, uint64_t seed, DType dtype, Device device, double mean, double stddev) {
  return random_tensor(shape, RandomKind::normal, mean, stddev, seed, dtype, device);
}

Tensor Tensor::uniform(const Shape& shape, double low, double high, uint64_t seed, DType dtype, Device device) {
  return random_tensor(shape, RandomKind::uniform, low, high, seed, dtype, device);
}

Tensor Tensor::from_blob(void* data, const Shape& shape, DType dtype, Device device) {
  CNN_CHECK(data != nullptr || shape.numel() == 0, "Tensor::from_blob: null pointer for shape ", shape.str());
  const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  return Tensor(make_impl(Storage::borrow(data, bytes, device), 0, shape, dtype));
}

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape) {
  CNN_CHECK(static_cast<int64_t>(values.size()) == shape.numel(), "Tensor::from_vector: ", values.size(),
            " values do not fill shape ", shape.str(), " (", shape.numel(), " elements)");
  Tensor t = empty(shape, dtype_of<T>());
  // Through the CPU copy, so that a graph capture records it as the kernels that read t.
  graph_capture::copy_on_cpu(t.data(), graph_capture::kept(values).data(), values.size() * sizeof(T));
  return t;
}
template Tensor Tensor::from_vector(const std::vector<float>&, const Shape&);
template Tensor Tensor::from_vector(const std::vector<double>&, const Shape&);
template Tensor Tensor::from_vector(const std::vector<int32_t>&, const Shape&);
template Tensor Tensor::from_vector(const std::vector<int64_t>&, const Shape&);
template Tensor Tensor::from_vector(const std::vector<uint8_t>&, const Shape&);
template Tensor Tensor::from_vector(const std::vector<half>&, const Shape&);
template Tensor Tensor::from_vector(const std::vector<bfloat16>&, const Shape&);

// ---- properties ----

const Shape& Tensor::shape() const { return checked(impl_).shape; }
DType Tensor::dtype() const { return checked(impl_).dtype; }
Device Tensor::device() const { return checked(impl_).storage->device(); }
uint64_t Tensor::id() const { return checked(impl_).id; }

int64_t Tensor::size(int axis) const {
  const int rank = dim();
  const int a = axis < 0 ? axis + rank : axis;
  CNN_CHECK(a >= 0 && a < rank, "axis ", axis, " out of range for a tensor of shape ", shape().str());
  return shape()[a];
}

void* Tensor::data() const {
  const TensorImpl& impl = checked(impl_);
  return static_cast<char*>(impl.storage->data()) + impl.offset;
}

// ---- views ----

namespace {
Tensor reshape_dims(const Tensor& self, std::vector<int64_t> dims);
}

Tensor Tensor::reshape(const Shape& new_shape) const { return reshape_dims(*this, new_shape.to_vector()); }

Tensor Tensor::reshape(std::initializer_list<int64_t> dims) const { return reshape_dims(*this, std::vector<int64_t>(dims)); }

namespace {
Tensor reshape_dims(const Tensor& self, std::vector<int64_t> dims) {
  const auto shape_text = [&dims] {
    std::string s = "[";
    for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
    return s + "]";
  }();
  int64_t known = 1;
  int inferred = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      CNN_CHECK(inferred < 0, "reshape of ", describe(self), " to ", shape_text, ": only one -1 is allowed");
      inferred = static_cast<int>(i);
    } else {
      known *= dims[i];
    }
  }
  if (inferred >= 0) {
    CNN_CHECK(known > 0 && self.numel() % known == 0, "reshape of ", describe(self), " to ", shape_text,
              ": cannot infer the -1 dimension");
    dims[static_cast<size_t>(inferred)] = self.numel() / known;
  }
  const Shape target(dims);
  CNN_CHECK(target.numel() == self.numel(), "reshape of ", describe(self), " to ", target.str(), ": ", self.numel(),
            " elements cannot become ", target.numel());
  Tensor view(make_impl(self.impl()->storage, self.impl()->offset, target, self.dtype()));
  const Shape original = self.shape();
  record_op("reshape", {self}, {view},
            [original](const std::vector<Tensor>& g) -> std::vector<Tensor> { return {g[0].reshape(original)}; });
  return view;
}
}  // namespace

Tensor Tensor::slice(int64_t begin, int64_t end) const {
  CNN_CHECK(dim() >= 1, "slice of a scalar tensor ", describe(*this));
  const int64_t rows = shape()[0];
  CNN_CHECK(0 <= begin && begin <= end && end <= rows, "slice [", begin, ", ", end, ") out of range for ",
            describe(*this));
  Shape s = shape();
  s[0] = end - begin;
  const int64_t row_bytes = rows ? static_cast<int64_t>(nbytes()) / rows : 0;
  Tensor view(make_impl(impl_->storage, impl_->offset + static_cast<size_t>(begin * row_bytes), s, dtype()));
  const Shape original = shape();
  record_op("slice", {*this}, {view}, [original, begin, end](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    Tensor full = Tensor::zeros(original, g[0].dtype(), g[0].device());
    full.slice(begin, end).copy_(g[0]);
    return {full};
  });
  return view;
}

Tensor Tensor::flatten_rows() const {
  CNN_CHECK(dim() >= 1, "flatten_rows of a scalar tensor ", describe(*this));
  return reshape({numel() / std::max<int64_t>(shape()[dim() - 1], 1), shape()[dim() - 1]});
}

// ---- copies ----

Tensor Tensor::to(Device target) const {
  if (device() == target) return *this;
  Tensor out = empty(shape(), dtype(), target);
  cuda::copy(out.data(), target, data(), device(), nbytes());
  const Device source = device();
  record_op("to_device", {*this}, {out},
            [source](const std::vector<Tensor>& g) -> std::vector<Tensor> { return {g[0].to(source)}; });
  return out;
}

Tensor Tensor::to(DType target) const { return cast(*this, target); }

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), dtype(), device());
  cuda::copy(out.data(), device(), data(), device(), nbytes());
  record_op("clone", {*this}, {out}, [](const std::vector<Tensor>& g) -> std::vector<Tensor> { return {g[0]}; });
  return out;
}

Tensor& Tensor::copy_(const Tensor& src) {
  CNN_CHECK(src.shape() == shape() && src.dtype() == dtype(), "copy_ into ", describe(*this), " from ",
            describe(src), ": shapes and dtypes must match (cast with .to(dtype) first)");
  cuda::copy(data(), device(), src.data(), src.device(), nbytes());
  return *this;
}

Tensor& Tensor::fill_(double value) {
  const DType dt = dtype();
  CNN_KERNEL(device(), fill, dt, data(), numel(), value);
  return *this;
}

Tensor Tensor::pin_memory() const {
  CNN_CHECK(device().is_cpu(), "pin_memory of ", describe(*this), ": only CPU tensors can be pinned");
  Tensor out = empty(shape(), dtype(), Device::cpu(), /*pinned=*/true);
  std::memcpy(out.data(), data(), nbytes());
  return out;
}

void Tensor::record_stream(void* stream) const {
  if (defined() && (is_cuda() || impl_->storage->pinned())) impl_->storage->record_stream(stream);
}

std::vector<double> Tensor::to_doubles() const {
  host_sync_point("reading a tensor's values on the host");
  Tensor host = device().is_cpu() ? *this : detach().to(Device::cpu());
  std::vector<double> out(static_cast<size_t>(numel()));
  Tensor as_f64 = Tensor::from_blob(out.data(), shape(), DType::f64);
  kernels::cpu::cast(dtype(), host.data(), DType::f64, as_f64.data(), numel());
  return out;
}

double Tensor::item() const {
  CNN_CHECK(numel() == 1, "item() of ", describe(*this), ": the tensor must have exactly one element");
  return to_doubles()[0];
}

// ---- autograd ----

Tensor& Tensor::requires_grad_(bool on) {
  TensorImpl& impl = const_cast<TensorImpl&>(checked(impl_));
  CNN_CHECK(!on || is_floating(impl.dtype), "requires_grad_ on ", describe(*this),
            ": only floating tensors have gradients");
  CNN_CHECK(impl.is_leaf, "requires_grad_ on ", describe(*this),
            ": only leaf tensors (not outputs of recorded ops) can be marked; use detach() first");
  impl.requires_grad = on;
  return *this;
}

bool Tensor::requires_grad() const { return impl_ && impl_->requires_grad; }
bool Tensor::is_leaf() const { return checked(impl_).is_leaf; }
Tensor Tensor::grad() const { return checked(impl_).grad; }
void Tensor::set_grad(const Tensor& g) const { const_cast<TensorImpl&>(checked(impl_)).grad = g; }
void Tensor::zero_grad() const { set_grad(Tensor()); }

Tensor Tensor::detach() const {
  const TensorImpl& impl = checked(impl_);
  return Tensor(make_impl(impl.storage, impl.offset, impl.shape, impl.dtype));
}

// ---- printing ----

std::string describe(const Tensor& t) {
  if (!t.defined()) return "<undefined tensor>";
  return t.shape().str() + " " + dtype_name(t.dtype()) + " " + t.device().str();
}

std::string Tensor::str() const {
  if (!defined()) return "tensor(<undefined>)";
  const std::vector<double> v = to_doubles();
  const Shape& s = shape();
  std::ostringstream out;
  out << "tensor(";
  const int64_t last = s.rank() ? s[s.rank() - 1] : 1;
  const int64_t rows = last ? numel() / last : 0;
  constexpr int64_t kEdge = 3;  // rows and columns shown at each end before "..."
  auto print_row = [&](int64_t r) {
    out << "[";
    for (int64_t c = 0; c < last; ++c) {
      if (last > 2 * kEdge + 1 && c == kEdge) {
        out << "..., ";
        c = last - kEdge;
      }
      out << std::setprecision(5) << v[static_cast<size_t>(r * last + c)] << (c + 1 < last ? ", " : "");
    }
    out << "]";
  };
  if (s.rank() <= 1) {
    if (s.rank() == 0) out << v[0];
    else print_row(0);
  } else {
    out << "[";
    for (int64_t r = 0; r < rows; ++r) {
      if (rows > 2 * kEdge + 1 && r == kEdge) {
        out << "\n        ...,";
        r = rows - kEdge;
      }
      out << (r ? "\n        " : "");
      print_row(r);
      out << (r + 1 < rows ? "," : "");
    }
    out << "]";
  }
  out << ", shape=" << s.str() << ", dtype=" << dtype_name(dtype()) << ", device=" << device().str();
  if (requires_grad()) out << ", requires_grad";
  out << ")";
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const Tensor& t) { return out << t.str(); }

}  // namespace cnn
