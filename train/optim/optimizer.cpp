// The optimizer base: slot tables per group, lazily created state, freezing, low-precision
// copies, and state save/restore.
#include "train/optim/optimizer.h"

#include <tuple>

#include "engine/error.h"

namespace cnn::train {

Optimizer::Optimizer(std::vector<ParamGroup> groups) : groups_(std::move(groups)) {
  std::set<std::string> names;
  for (const ParamGroup& g : groups_)
    for (const auto& [name, p] : g.params) {
      CNN_CHECK(names.insert(name).second, "optimizer: parameter '", name, "' is in more than one group");
      CNN_CHECK(p.defined() && p.dtype() == DType::f32, "optimizer: parameter '", name, "' is ",
                p.defined() ? describe(p) : "undefined",
                "; optimizers update f32 master weights (keep low-precision copies with set_low_precision_copy)");
    }
}

std::vector<float> Optimizer::group_learning_rates(double lr) const {
  std::vector<float> lrs;
  for (const ParamGroup& group : groups_) lrs.push_back(static_cast<float>(lr * group.lr_mult));
  return lrs;
}

void Optimizer::step(double lr, double grad_scale, const Tensor& control) {
  step_groups(group_learning_rates(lr), Tensor(), grad_scale, control);
}

void Optimizer::step(const Tensor& group_lrs, double grad_scale, const Tensor& control) {
  CNN_CHECK(group_lrs.dtype() == DType::f32 && group_lrs.shape() == Shape{static_cast<int64_t>(groups_.size())},
            "optimizer: the learning rates on the device must be f32 [", groups_.size(), "] (one per group), got ",
            describe(group_lrs));
  step_groups(std::vector<float>(groups_.size(), 0.f), group_lrs, grad_scale, control);
}

void Optimizer::step_groups(const std::vector<float>& lrs, const Tensor& group_lrs, double grad_scale,
                            const Tensor& control) {
  for (size_t group_index = 0; group_index < groups_.size(); ++group_index) {
    const ParamGroup& group = groups_[group_index];
    // one table per (device type, device index, grad dtype, copy dtype)
    std::map<std::tuple<int, int, int, int>, SlotTable> tables;
    for (const auto& [name, p] : group.params) {
      const Tensor g = p.grad();
      if (is_frozen(name) || !g.defined()) continue;
      CNN_CHECK(g.shape() == p.shape() && g.device() == p.device(), "optimizer: gradient ", describe(g),
                " of parameter '", name, "' ", describe(p), " differs in shape or device");
      CNN_CHECK(g.dtype() == DType::f32 || g.dtype() == DType::f16 || g.dtype() == DType::bf16, "optimizer: gradient of '",
                name, "' is ", describe(g), "; gradients must be f32, f16 or bf16");
      ParamState& st = state_[name];
      if (!st.state1.defined() && states_used() >= 1) st.state1 = Tensor::zeros(p.shape(), DType::f32, p.device());
      if (!st.state2.defined() && states_used() >= 2) st.state2 = Tensor::zeros(p.shape(), DType::f32, p.device());
      if (!st.steps.defined()) st.steps = Tensor::zeros({}, DType::f32, p.device());
      CNN_CHECK(!control.defined() || control.device() == p.device(), "optimizer: parameter '", name, "' is on ",
                p.device().str(), " but the step's control block on ", control.device().str());
      const DType copy_dtype = st.copy.defined() ? st.copy.dtype() : DType::f16;
      SlotTable& table = tables[{static_cast<int>(p.device().type), p.device().index, static_cast<int>(g.dtype()),
                                     static_cast<int>(copy_dtype)}];
      table.device = p.device();
      kernels::MultiTensorSlot& slot = table.add(p.numel());
      slot.param = p.data_as<float>();
      slot.grad = g.data();
      slot.state1 = st.state1.defined() ? st.state1.data_as<float>() : nullptr;
      slot.state2 = st.state2.defined() ? st.state2.data_as<float>() : nullptr;
      slot.param_copy = st.copy.defined() ? st.copy.data() : nullptr;
      slot.step_count = st.steps.data_as<float>();
    }
    for (auto& [key, table] : tables) {
      CNN_CHECK(!group_lrs.defined() || group_lrs.device() == table.device, "optimizer: the learning rates are on ",
                group_lrs.device().str(), " but group ", group_index, "'s parameters on ", table.device.str());
      update(table, {lrs[group_index], group.weight_decay, grad_scale, static_cast<DType>(std::get<2>(key)),
                     static_cast<DType>(std::get<3>(key)), control.defined() ? control.data_as<float>() : nullptr,
                     group_lrs.defined() ? group_lrs.data_as<float>() + group_index : nullptr});
    }
  }
}

std::vector<const void*> Optimizer::memory_used() const {
  static const char frozen_mark = 0;
  const auto data_of = [](const Tensor& t) -> const void* { return t.defined() ? t.data() : nullptr; };
  std::vector<const void*> used;
  for (const ParamGroup& group : groups_)
    for (const auto& [name, p] : group.params) {
      used.push_back(data_of(p));
      used.push_back(is_frozen(name) ? &frozen_mark : nullptr);
      const auto st = state_.find(name);
      if (st == state_.end()) {
        used.insert(used.end(), 4, nullptr);
        continue;
      }
      for (const Tensor* t : {&st->second.state1, &st->second.state2, &st->second.steps, &st->second.copy})
        used.push_back(data_of(*t));
    }
  return used;
}

void Optimizer::zero_grad() {
  for (const ParamGroup& group : groups_)
    for (const auto& [name, p] : group.params) p.zero_grad();
}

void Optimizer::set_frozen(const std::vector<std::string>& prefixes, bool frozen) {
  for (const std::string& prefix : prefixes) {
    bool matched = false;
    for (const ParamGroup& group : groups_)
      for (const auto& [name, p] : group.params)
        if (has_name_prefix(name, prefix)) {
          matched = true;
          if (frozen)
            frozen_.insert(name);
          else
            frozen_.erase(name);
        }
    CNN_CHECK(matched, "optimizer: no parameter name starts with '", prefix,
              "' (freeze prefixes are whole name components, e.g. 'layer1' or 'layer1.0')");
  }
}

void Optimizer::set_low_precision_copy(const std::string& name, const Tensor& copy) {
  for (const ParamGroup& group : groups_)
    for (const auto& [n, p] : group.params)
      if (n == name) {
        CNN_CHECK(copy.shape() == p.shape() && copy.device() == p.device() &&
                      (copy.dtype() == DType::f16 || copy.dtype() == DType::bf16),
                  "optimizer: low-precision copy ", describe(copy), " of '", name, "' ", describe(p),
                  " must have its shape and device, and dtype f16 or bf16");
        state_[name].copy = copy;
        return;
      }
  throw Error("optimizer: no parameter '" + name + "' to keep a low-precision copy of");
}

std::vector<Tensor> Optimizer::gradients() const {
  std::vector<Tensor> grads;
  for (const ParamGroup& group : groups_)
    for (const auto& [name, p] : group.params)
      if (!is_frozen(name) && p.grad().defined()) grads.push_back(p.grad());
  return grads;
}

int64_t Optimizer::steps_of(const std::string& name) const {
  const auto it = state_.find(name);
  return it == state_.end() || !it->second.steps.defined() ? 0 : static_cast<int64_t>(it->second.steps.item());
}

io::NamedTensors Optimizer::state() const {
  io::NamedTensors out;
  const std::vector<std::string> names = state_names();
  for (const ParamGroup& group : groups_)
    for (const auto& [name, p] : group.params) {
      const auto it = state_.find(name);
      const int64_t steps = steps_of(name);
      if (steps == 0) continue;
      out.emplace_back(name + ".step", Tensor::from_vector<int64_t>({steps}, {}));
      const Tensor* states[] = {&it->second.state1, &it->second.state2};
      for (size_t i = 0; i < names.size(); ++i)
        if (states[i]->defined()) out.emplace_back(name + "." + names[i], *states[i]);
    }
  return out;
}

void Optimizer::load_state(const io::NamedTensors& saved) {
  std::set<std::string> used;
  const std::vector<std::string> names = state_names();
  for (const ParamGroup& group : groups_)
    for (const auto& [name, p] : group.params) {
      ParamState& st = state_[name];
      st.steps = Tensor::zeros({}, DType::f32, p.device());
      st.state1 = st.state2 = Tensor();
      for (const auto& [key, t] : saved) {
        if (key == name + ".step") {
          st.steps = Tensor::full({}, t.item(), DType::f32, p.device());
          used.insert(key);
        }
        for (size_t i = 0; i < names.size(); ++i)
          if (key == name + "." + names[i]) {
            CNN_CHECK(t.shape() == p.shape(), "optimizer state '", key, "' is ", describe(t), " but parameter '", name,
                      "' is ", describe(p), "; was it saved for a different model?");
            (i == 0 ? st.state1 : st.state2) = t.to(DType::f32).to(p.device()).clone();
            used.insert(key);
          }
      }
    }
  for (const auto& [key, t] : saved)
    CNN_CHECK(used.count(key) != 0, "optimizer state '", key,
              "' belongs to no parameter of this optimizer; was it saved for a different model or optimizer?");
}

}  // namespace cnn::train
