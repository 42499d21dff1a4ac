// The module tree: registration, traversal in torchvision's order, initialisation, placement,
// modes and gradient checkpointing of blocks (see module.h).
#include "layers/module.h"

#include "engine/ops.h"
#include "engine/profiler.h"
#include "engine/tape.h"
#include "layers/shape_trace.h"

namespace cnn {

Module::Module(std::string type_name) : type_name_(std::move(type_name)) {}
Module::~Module() = default;

Tensor Module::forward(const Tensor& x) {
  CNN_CHECK(x.defined(), type_name_, ": forward of an undefined tensor");
  const profiler::ModuleScope span(name_, type_name_, device_);  // one branch while the profiler is off
  if (is_floating(x.dtype()) && x.dtype() != compute_dtype_) return compute(cast(x, compute_dtype_));
  return compute(x);
}

// ---- registration ----

size_t Module::add_parameter(std::string name, const Shape& shape, ParamRole role, ParamInit init) {
  parameters_.push_back({std::move(name), shape, DType::f32, role, init, Tensor(), Tensor()});
  return parameters_.size() - 1;
}

size_t Module::add_buffer(std::string name, const Shape& shape, DType dtype, ParamInit init) {
  buffers_.push_back({std::move(name), shape, dtype, ParamRole::bias, init, Tensor(), Tensor()});
  return buffers_.size() - 1;
}

void Module::adopt(std::string name, std::unique_ptr<Module> module) {
  CNN_CHECK(module != nullptr, type_name_, ": child '", name, "' is null");
  for (const Child& c : children_)
    CNN_CHECK(c.name != name, type_name_, ": two children named '", name, "'; each child needs its own name");
  module->name_ = name;
  module->device_ = device_;
  module->compute_dtype_ = compute_dtype_;
  module->training_ = training_;
  children_.push_back({std::move(name), std::move(module)});
}

void Module::set_parameter_init(size_t index, ParamInit init) {
  CNN_CHECK(index < parameters_.size(), type_name_, ": no parameter number ", index);
  parameters_[index].init = init;
}

// ---- access ----

const Tensor& Module::checked_tensor(const Slot& slot, const char* kind) const {
  CNN_CHECK(slot.tensor.defined(), type_name_, ": ", kind, " '", slot.name,
            "' is not initialised; call initialize(seed) on the model first (make_model does)");
  return slot.tensor;
}

const Tensor& Module::parameter(size_t index) const { return checked_tensor(parameters_.at(index), "parameter"); }

Tensor Module::parameter_as(size_t index, const Tensor& x) const {
  const Tensor& p = parameter(index);
  if (p.dtype() == x.dtype()) return p;
  const Tensor& cached = parameters_[index].low_precision;
  if (!cached.defined() || cached.dtype() != x.dtype()) return cast(p, x.dtype());
  // cast(p) without the cast: the cached copy's values, with cast's gradient rule back to the master
  Tensor y = cached.detach();
  const DType master_dtype = p.dtype();
  record_op("cast", {p}, {y},
            [master_dtype](const std::vector<Tensor>& g) -> std::vector<Tensor> { return {cast(g[0], master_dtype)}; });
  return y;
}

const Tensor& Module::buffer(size_t index) const { return checked_tensor(buffers_.at(index), "buffer"); }

void Module::set_buffer(size_t index, const Tensor& tensor) {
  Slot& slot = buffers_.at(index);
  CNN_CHECK(tensor.defined() && tensor.shape() == slot.shape, type_name_, ": buffer '", slot.name, "' has shape ",
            slot.shape.str(), ", cannot hold ", describe(tensor));
  slot.tensor = tensor;
}

// ---- traversal ----

void Module::walk(const std::string& prefix, bool in_head,
                  const std::function<void(Module&, const std::string&, bool)>& f) {
  const bool head = in_head || is_head_;
  f(*this, prefix, head);
  for (Child& c : children_) c.module->walk(prefix + c.name + ".", head, f);
}

void Module::walk(const std::string& prefix, bool in_head,
                  const std::function<void(const Module&, const std::string&, bool)>& f) const {
  const bool head = in_head || is_head_;
  f(*this, prefix, head);
  for (const Child& c : children_) static_cast<const Module&>(*c.module).walk(prefix + c.name + ".", head, f);
}

std::vector<NamedParameter> Module::named_parameters() const {
  std::vector<NamedParameter> out;
  walk("", false, [&](const Module& m, const std::string& prefix, bool head) {
    for (const Slot& s : m.parameters_) out.push_back({prefix + s.name, s.tensor, s.role, head});
  });
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (NamedParameter& p : named_parameters()) out.push_back(std::move(p.tensor));
  return out;
}

std::vector<NamedTensor> Module::named_buffers() const {
  std::vector<NamedTensor> out;
  walk("", false, [&](const Module& m, const std::string& prefix, bool) {
    for (const Slot& s : m.buffers_) out.push_back({prefix + s.name, s.tensor});
  });
  return out;
}

std::vector<StateEntry> Module::state_dict() const {
  std::vector<StateEntry> out;
  walk("", false, [&](const Module& m, const std::string& prefix, bool) {
    for (const Slot& s : m.parameters_) out.push_back({prefix + s.name, s.shape, s.tensor, true});
    for (const Slot& s : m.buffers_) out.push_back({prefix + s.name, s.shape, s.tensor, false});
  });
  return out;
}

int64_t Module::parameter_count() const {
  int64_t total = 0;
  walk("", false, [&](const Module& m, const std::string&, bool) {
    for (const Slot& s : m.parameters_) total += s.shape.numel();
  });
  return total;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  walk("", false, [&](Module& m, const std::string& prefix, bool) {
    out.emplace_back(prefix.empty() ? prefix : prefix.substr(0, prefix.size() - 1), &m);
  });
  return out;
}

Module& Module::submodule(const std::string& path) {
  Module* at = this;
  size_t begin = 0;
  while (begin <= path.size() && !path.empty()) {
    const size_t end = std::min(path.find('.', begin), path.size());
    const std::string part = path.substr(begin, end - begin);
    Module* next = nullptr;
    std::string names;
    for (Child& c : at->children_) {
      if (c.name == part) next = c.module.get();
      names += (names.empty() ? "" : ", ") + c.name;
    }
    CNN_CHECK(next != nullptr, "no module '", part, "' in '", path, "' (", at->type_name_, " has children: ",
              names.empty() ? "none" : names, ")");
    at = next;
    begin = end + 1;
  }
  return *at;
}

// ---- state changes over the subtree ----

void Module::train(bool on) {
  walk("", false, [&](Module& m, const std::string&, bool) { m.training_ = on; });
}

void Module::set_parameters(const std::vector<Tensor>& tensors) {
  drop_low_precision_copies();
  std::vector<Slot*> slots;
  walk("", false, [&](Module& m, const std::string&, bool) {
    for (Slot& s : m.parameters_) slots.push_back(&s);
  });
  CNN_CHECK(tensors.size() == slots.size(), type_name_, ".set_parameters: got ", tensors.size(),
            " tensors for ", slots.size(), " parameters; pass them in named_parameters() order");
  for (size_t i = 0; i < slots.size(); ++i) {
    CNN_CHECK(tensors[i].defined() && tensors[i].shape() == slots[i]->shape, type_name_,
              ".set_parameters: tensor ", i, " is ", describe(tensors[i]), " but parameter '", slots[i]->name,
              "' has shape ", slots[i]->shape.str());
    slots[i]->tensor = tensors[i];
  }
}

void Module::zero_grad() {
  walk("", false, [&](Module& m, const std::string&, bool) {
    for (Slot& s : m.parameters_)
      if (s.tensor.defined()) s.tensor.zero_grad();
  });
}

void Module::set_requires_grad(bool on) {
  walk("", false, [&](Module& m, const std::string&, bool) {
    for (Slot& s : m.parameters_)
      if (s.tensor.defined()) s.tensor.requires_grad_(on);
  });
}

void Module::initialize(uint64_t seed) {
  uint64_t index = 0;
  walk("", false, [&](Module& m, const std::string&, bool) {
    for (Slot& s : m.parameters_) {
      NoGrad no_grad;
      s.tensor = s.init.draw(s.shape, derive_seed(seed, index++), s.dtype).to(m.device_);
      s.tensor.requires_grad_(true);
    }
    for (Slot& s : m.buffers_) s.tensor = s.init.draw(s.shape, 0, s.dtype).to(m.device_);
  });
  reseed(derive_seed(seed, ~uint64_t{0}));
}

bool Module::initialized() const {
  bool all = true;
  walk("", false, [&](const Module& m, const std::string&, bool) {
    for (const Slot& s : m.parameters_) all = all && s.tensor.defined();
    for (const Slot& s : m.buffers_) all = all && s.tensor.defined();
  });
  return all;
}

void Module::reseed(uint64_t seed) {
  uint64_t index = 0;
  walk("", false, [&](Module& m, const std::string&, bool) {
    m.random_seed_ = derive_seed(seed, index++);
    m.random_seed_from_ = Tensor();
    m.random_offset_ = 0;
  });
}

void Module::reseed_on_device(const Tensor& seed) {
  CNN_CHECK(seed.dtype() == DType::i64 && seed.numel() == 1 && seed.device() == device_, type_name_,
            ".reseed_on_device: needs one i64 on ", device_.str(), ", got ", describe(seed));
  uint64_t index = 0;
  walk("", false, [&](Module& m, const std::string&, bool) {
    m.random_seed_ = index++;  // the kernels derive derive_seed(seed, index), as reseed does
    m.random_seed_from_ = seed;
    m.random_offset_ = 0;
  });
}

void Module::to(Device device) {
  if (device != device_) drop_low_precision_copies();
  NoGrad no_grad;
  walk("", false, [&](Module& m, const std::string&, bool) {
    m.device_ = device;
    for (Slot& s : m.parameters_) {
      if (!s.tensor.defined() || s.tensor.device() == device) continue;
      const bool wants_grad = s.tensor.requires_grad();
      s.tensor = s.tensor.detach().to(device);
      s.tensor.requires_grad_(wants_grad);
    }
    for (Slot& s : m.buffers_)
      if (s.tensor.defined()) s.tensor = s.tensor.to(device);
  });
}

void Module::to(DType compute_dtype) {
  CNN_CHECK(is_floating(compute_dtype), type_name_, ".to(", dtype_name(compute_dtype),
            "): activations are computed in a floating dtype (f32, f64, f16 or bf16)");
  if (compute_dtype != compute_dtype_) drop_low_precision_copies();
  walk("", false, [&](Module& m, const std::string&, bool) { m.compute_dtype_ = compute_dtype; });
}

// ---- cached low-precision weights ----

namespace {
// Parameters that the layers cast to the compute dtype (convolutions, linear layers); normalisation
// parameters are used in f32.
bool cast_where_used(ParamRole role) { return role != ParamRole::norm_weight && role != ParamRole::norm_bias; }
}  // namespace

std::vector<NamedTensor> Module::keep_low_precision_copies() {
  drop_low_precision_copies();
  std::vector<NamedTensor> copies;
  if (compute_dtype_ != DType::f16 && compute_dtype_ != DType::bf16) return copies;
  NoGrad no_grad;
  walk("", false, [&](Module& m, const std::string& prefix, bool) {
    for (Slot& s : m.parameters_) {
      if (!cast_where_used(s.role) || !s.tensor.defined() || s.tensor.dtype() != DType::f32) continue;
      s.low_precision = cast(s.tensor, m.compute_dtype_);
      copies.push_back({prefix + s.name, s.low_precision});
    }
  });
  return copies;
}

void Module::refresh_low_precision_copies() {
  NoGrad no_grad;
  walk("", false, [&](Module& m, const std::string&, bool) {
    for (Slot& s : m.parameters_)
      if (s.low_precision.defined()) s.low_precision.copy_(cast(s.tensor, s.low_precision.dtype()));
  });
}

void Module::drop_low_precision_copies() {
  walk("", false, [&](Module& m, const std::string&, bool) {
    for (Slot& s : m.parameters_) s.low_precision = Tensor();
  });
}

bool Module::keeps_low_precision_copies() const {
  bool any = false;
  walk("", false, [&](const Module& m, const std::string&, bool) {
    for (const Slot& s : m.parameters_) any = any || s.low_precision.defined();
  });
  return any;
}

// ---- gradient checkpointing ----

void Module::set_gradient_checkpointing(bool on) {
  walk("", false, [&](Module& m, const std::string&, bool) { m.checkpointing_ = on && m.checkpointable_; });
}

std::vector<uint64_t> Module::random_offsets_below() const {
  std::vector<uint64_t> offsets;
  walk("", false, [&](const Module& m, const std::string&, bool) { offsets.push_back(m.random_offset_); });
  return offsets;
}

void Module::restore_random_offsets(const std::vector<uint64_t>& offsets) {
  size_t i = 0;
  walk("", false, [&](Module& m, const std::string&, bool) { m.random_offset_ = offsets.at(i++); });
}

void Module::set_replaying(bool on) {
  walk("", false, [&](Module& m, const std::string&, bool) { m.replaying_ = on; });
}

Tensor Module::run_block(const Tensor& x, const std::function<Tensor(const Tensor&)>& body) {
  if (!checkpointing_ || !training_ || recording_tape() == nullptr) return body(x);
  const std::vector<uint64_t> offsets_at_forward = random_offsets_below();
  auto runs = std::make_shared<int>(0);
  const CheckpointFn segment = [this, body, offsets_at_forward, runs](const std::vector<Tensor>& inputs) {
    if ((*runs)++ == 0) return std::vector<Tensor>{body(inputs[0])};
    // The replay during backward: the forward's random offsets, running statistics left alone.
    struct ReplayScope {
      Module& block;
      std::vector<uint64_t> offsets_now;
      ReplayScope(Module& m, const std::vector<uint64_t>& offsets_then) : block(m), offsets_now(m.random_offsets_below()) {
        block.restore_random_offsets(offsets_then);
        block.set_replaying(true);
      }
      ~ReplayScope() {
        block.set_replaying(false);
        block.restore_random_offsets(offsets_now);
      }
    } scope(*this, offsets_at_forward);
    return std::vector<Tensor>{body(inputs[0])};
  };
  return checkpoint(segment, {x})[0];
}

}  // namespace cnn
