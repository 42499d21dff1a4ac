// Tensor: a view (storage, byte offset, shape, dtype) of contiguous row-major memory on one device.
// Copying a Tensor copies the handle, not the data. Views exist only for reshape and slicing along
// the first axis. Autograd state (requires_grad, .grad) lives with the tensor; the tape that
// computes gradients is in tape.h.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/dtype.h"
#include "engine/error.h"
#include "engine/shape.h"
#include "engine/storage.h"

namespace cnn {

struct TensorImpl;

class Tensor {
 public:
  Tensor() = default;  // undefined: defined() is false

  // ---- creation ----
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu(), bool pinned = false);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32, Device device = Device::cpu());
  // Philox draws keyed by (seed, element index): the same values on CPU and CUDA for a seed.
  static Tensor randn(const Shape& shape, uint64_t seed, DType dtype = DType::f32, Device device = Device::cpu(),
                      double mean = 0.0, double stddev = 1.0);
  static Tensor uniform(const Shape& shape, double low, double high, uint64_t seed, DType dtype = DType::f32,
                        Device device = Device::cpu());
  // Wraps memory the caller owns (host or device) without taking ownership; the caller keeps it
  // alive for as long as the tensor (and any view of it) is used.
  static Tensor from_blob(void* data, const Shape& shape, DType dtype, Device device = Device::cpu());
  // Copies host values into a new CPU tensor of the matching dtype.
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape);

  // ---- properties ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  int dim() const { return shape().rank(); }
  int64_t size(int axis) const;  // negative axes count from the end
  int64_t numel() const { return shape().numel(); }
  DType dtype() const;
  Device device() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype()); }
  bool is_cuda() const { return device().is_cuda(); }
  void* data() const;
  template <class T>
  T* data_as() const {  // checks the dtype
    CNN_CHECK(dtype() == dtype_of<T>(), "tensor of dtype ", dtype_name(dtype()), " accessed as ",
              dtype_name(dtype_of<T>()));
    return static_cast<T*>(data());
  }
  uint64_t id() const;  // unique for the life of the process; the tape keys gradients by it
  std::string str() const;  // readable printing (shape, dtype, device and values, elided when long)

  // ---- views (recorded on the tape, so gradients flow through them) ----
  Tensor reshape(const Shape& shape) const;
  Tensor reshape(std::initializer_list<int64_t> dims) const;  // one dimension may be -1
  Tensor slice(int64_t begin, int64_t end) const;  // [begin, end) of the first axis
  Tensor flatten_rows() const;  // [d0, d1, ..., dk] -> [d0 * ... * d(k-1), dk]

  // ---- copies and conversion ----
  Tensor to(Device device) const;  // same tensor if already there
  Tensor to(DType dtype) const;    // differentiable cast for floating types
  Tensor clone() const;
  Tensor& copy_(const Tensor& src);  // same shape and dtype, any devices
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }
  Tensor pin_memory() const;  // page-locked CPU copy
  // Work queued on `stream` (a cudaStream_t, not the device's current stream) also uses this
  // tensor's memory: once freed, it is reused only after that work has run (PyTorch's
  // Tensor.record_stream). For pinned host tensors too (an asynchronous copy from or to them on
  // `stream`; null is the current device's legacy default stream). A no-op for other host tensors
  // and memory the caller owns.
  void record_stream(void* stream) const;
  std::vector<double> to_doubles() const;  // all values, copied to the host
  double item() const;  // the value of a one-element tensor

  // ---- autograd ----
  Tensor& requires_grad_(bool on = true);  // marks a leaf (a parameter) for gradients
  bool requires_grad() const;
  bool is_leaf() const;
  Tensor grad() const;  // accumulated gradient of a leaf, undefined until the first backward
  void set_grad(const Tensor& g) const;
  void zero_grad() const;  // drops the accumulated gradient
  Tensor detach() const;   // same data, no autograd history

  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<TensorImpl> impl_;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  size_t offset = 0;  // bytes
  Shape shape;
  DType dtype = DType::f32;
  uint64_t id = 0;
  bool requires_grad = false;
  bool is_leaf = true;  // false for outputs recorded on a tape
  Tensor grad;
};

std::ostream& operator<<(std::ostream& out, const Tensor& t);

// "[2, 3] f32 cpu", for error messages.
std::string describe(const Tensor& t);

}  // namespace cnn
