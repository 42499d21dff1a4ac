// Module: a node of the layer tree. A module owns named parameters and buffers and named child
// modules; the names compose into torchvision's dotted names ("layer1.0.conv1.weight"), in the order
// of torchvision's state_dict. The tree carries the train/eval mode, the device, the compute dtype of
// activations (parameters stay in their master dtype, f32 by default, and are cast where used),
// gradient checkpointing of blocks, and the random streams of dropout-like layers.
//
// Parameters are created by initialize(seed) (make_model calls it): before that a module knows its
// parameters' shapes only, which is all the shape pass (infer_shape, used by cnn_summary) needs.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/device.h"
#include "engine/dtype.h"
#include "engine/tensor.h"
#include "layers/parameter.h"

namespace cnn {

class ShapeTrace;

class Module {
 public:
  explicit Module(std::string type_name);
  virtual ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Runs the module: a floating input is first cast to the compute dtype (see to(DType)). A span of
  // the profiler (engine/profiler.h) named by the module's dotted path when it records.
  Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }
  // The output shape for an input shape, without running any op. Leaves report their
  // multiply-accumulates to the trace; containers run their children through trace.run().
  virtual Shape infer_shape(const Shape& input, ShapeTrace& trace) const = 0;

  const std::string& type_name() const { return type_name_; }
  // Its name in the module that holds it ("conv1"); empty for a model.
  const std::string& name() const { return name_; }

  // ---- mode ----
  void train(bool on = true);  // this module and all below it
  void eval() { train(false); }
  bool training() const { return training_; }

  // ---- parameters and buffers (torchvision's names and order) ----
  std::vector<NamedParameter> named_parameters() const;
  std::vector<Tensor> parameters() const;
  std::vector<NamedTensor> named_buffers() const;
  std::vector<StateEntry> state_dict() const;  // parameters and buffers as PyTorch orders them
  int64_t parameter_count() const;              // elements of all parameters (buffers excluded)
  // Replaces the parameter tensors, in named_parameters() order (shapes must match): to load weights,
  // or to run the module on other leaves (e.g. f64 tensors in a gradient check).
  void set_parameters(const std::vector<Tensor>& tensors);
  void zero_grad();
  void set_requires_grad(bool on);  // freezes (false) or unfreezes every parameter of this subtree

  // ---- initialisation and randomness ----
  // Draws every parameter from its ParamInit with seed derive_seed(seed, index in named_parameters()),
  // resets the buffers, and reseeds the random streams: a model built twice with one seed is identical.
  void initialize(uint64_t seed);
  bool initialized() const;
  // Restarts the random streams (dropout, stochastic depth) from a seed, e.g. per epoch on resume.
  void reseed(uint64_t seed);
  // The same streams with their seeds worked out on the device from `seed` (one i64 on the model's
  // device): what reseed(seed's value) gives, whatever value a step writes there later, so that a
  // step captured as a CUDA graph draws each replay's masks from that step's seed.
  void reseed_on_device(const Tensor& seed);

  // ---- placement and precision ----
  void to(Device device);  // moves parameters and buffers; gradients are dropped
  // Sets the dtype activations are computed in (f32, f64, f16, bf16). Parameters keep their master
  // dtype and are cast (differentiably) where they are used.
  void to(DType compute_dtype);
  Device device() const { return device_; }
  DType compute_dtype() const { return compute_dtype_; }

  // ---- cached low-precision weights (PyTorch's autocast weight cache) ----
  // With a compute dtype of f16 or bf16, keeps a copy of every convolution and linear parameter cast
  // to it, which the layers then use instead of casting the f32 master in every forward (the
  // gradient still reaches the master, as through cast()). Returns the copies by parameter name, for
  // the optimizer, whose update kernel rewrites them in the pass that updates the masters
  // (Optimizer::set_low_precision_copy). With an f32 or f64 compute dtype it keeps none.
  // Whatever else writes master weights (loading weights, restoring a checkpoint, swapping in an
  // average, a broadcast) calls refresh_low_precision_copies() afterwards; set_parameters() and a
  // move to another device or compute dtype drop the copies.
  std::vector<NamedTensor> keep_low_precision_copies();
  void refresh_low_precision_copies();
  void drop_low_precision_copies();
  bool keeps_low_precision_copies() const;

  // ---- gradient checkpointing ----
  // Runs the residual and MBConv blocks below this module under engine checkpoint() while training:
  // only each block's input is kept for the backward pass, which replays the block.
  void set_gradient_checkpointing(bool on);
  bool gradient_checkpointing() const { return checkpointing_; }

  // ---- the tree ----
  struct Child {
    std::string name;
    std::unique_ptr<Module> module;
  };
  const std::vector<Child>& children() const { return children_; }
  // Every module below (and including) this one with its dotted path ("" for this one), pre-order.
  std::vector<std::pair<std::string, Module*>> named_modules();
  // The module at a dotted path ("layer1.0.conv1"); a cnn::Error lists the children where it fails.
  Module& submodule(const std::string& path);
  // The classifier head of a model: its parameters (and those below it) have in_head set, so that a
  // trainer can freeze the backbone or give the head its own learning rate.
  void mark_as_head() { is_head_ = true; }
  bool is_head() const { return is_head_; }

 protected:
  virtual Tensor compute(const Tensor& x) = 0;

  // Registration, in torchvision's order (which is the state_dict order). Return indices for access.
  size_t add_parameter(std::string name, const Shape& shape, ParamRole role, ParamInit init);
  size_t add_buffer(std::string name, const Shape& shape, DType dtype, ParamInit init);
  template <class M>
  M* add_module(std::string name, std::unique_ptr<M> module) {
    M* raw = module.get();
    adopt(std::move(name), std::move(module));
    return raw;
  }
  void set_parameter_init(size_t index, ParamInit init);

  const Tensor& parameter(size_t index) const;
  Tensor parameter_as(size_t index, const Tensor& x) const;  // cast to x's dtype when it differs
  const Tensor& buffer(size_t index) const;
  void set_buffer(size_t index, const Tensor& tensor);  // same shape, e.g. converted to another dtype

  // Blocks call this in their constructor, then run their body through run_block().
  void allow_gradient_checkpointing() { checkpointable_ = true; }
  // body(x), under checkpoint() when checkpointing is on, the module is training and a tape records.
  // The replay draws the same random masks and leaves the running statistics alone.
  Tensor run_block(const Tensor& x, const std::function<Tensor(const Tensor&)>& body);
  bool replaying() const { return replaying_; }

  // For random layers: the stream's seed, and the offset of the next `draws` values of the stream
  // (an op keyed by (seed, offset + element) then draws values no other call draws).
  // With reseed_on_device, random_seed() is the index that derives the seed from random_seed_from().
  uint64_t random_seed() const { return random_seed_; }
  const Tensor& random_seed_from() const { return random_seed_from_; }
  uint64_t take_random_offset(uint64_t draws) {
    const uint64_t offset = random_offset_;
    random_offset_ += draws;
    return offset;
  }

 private:
  struct Slot {
    std::string name;
    Shape shape;
    DType dtype = DType::f32;
    ParamRole role = ParamRole::conv_weight;
    ParamInit init;
    Tensor tensor;  // undefined until initialize()
    Tensor low_precision;  // the cached cast of `tensor` to the compute dtype, if kept
  };

  void adopt(std::string name, std::unique_ptr<Module> module);
  // Pre-order walk with each module's dotted prefix ("" or "layer1.0.").
  void walk(const std::string& prefix, bool in_head, const std::function<void(Module&, const std::string&, bool)>& f);
  void walk(const std::string& prefix, bool in_head,
            const std::function<void(const Module&, const std::string&, bool)>& f) const;
  std::vector<uint64_t> random_offsets_below() const;
  void restore_random_offsets(const std::vector<uint64_t>& offsets);
  void set_replaying(bool on);
  const Tensor& checked_tensor(const Slot& slot, const char* kind) const;

  std::string type_name_;
  std::string name_;  // in the parent module ("conv1"); empty for a model: names the profiler's spans
  std::vector<Slot> parameters_;
  std::vector<Slot> buffers_;
  std::vector<Child> children_;
  bool training_ = true;
  bool is_head_ = false;
  bool checkpointable_ = false;
  bool checkpointing_ = false;
  bool replaying_ = false;
  Device device_ = Device::cpu();
  DType compute_dtype_ = DType::f32;
  uint64_t random_seed_ = 0;
  uint64_t random_offset_ = 0;
  Tensor random_seed_from_;  // reseed_on_device's seed (undefined: random_seed_ is the seed)
};

}  // namespace cnn
