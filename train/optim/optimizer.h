// Optimizers over parameter groups (train/optim/param_groups.h): the common part of SGD and AdamW.
// A step updates, in each group, every parameter that has a gradient and is not frozen, with one
// multi-tensor kernel launch per group (per gradient dtype); learning rate lr * group.lr_mult and
// the group's weight decay. Parameters are f32 master weights; state is f32, created at a
// parameter's first step. A parameter may have a low-precision copy (f16/bf16) that every step
// rewrites from the updated weight.
//
//   SGD opt(make_param_groups(model_params, {...}), {.momentum = 0.9});
//   opt.step(schedule.lr(step), clip_coefficient(stats.norm, max_norm));
//   opt.zero_grad();
// In training the step is governed from the device instead (train/loss_scaler.h): step(lr, 1,
// scaler.control()) applies only if the control block says so, with its clipping coefficient, and
// each parameter's step count lives on its device (an f32 counter the kernel advances), so that no
// part of the step waits for the host.
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/io/named_tensors.h"
#include "train/optim/multi_tensor.h"
#include "train/optim/param_groups.h"

namespace cnn::train {

class Optimizer {
 public:
  explicit Optimizer(std::vector<ParamGroup> groups);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update at learning rate lr, gradients multiplied by grad_scale first (a clipping
  // coefficient, or 1 / loss scale when the gradients were not unscaled), governed by the control
  // block `control` when it is given (kernels/optimizer.h: skipped, or gradients times its
  // coefficient).
  void step(double lr, double grad_scale = 1.0, const Tensor& control = Tensor());
  // The same update with each group's learning rate read on the device from group_lrs (f32
  // [groups().size()] on the parameters' device), as a replayed CUDA graph needs: write
  // group_learning_rates(lr) there before each replay. The same bits as step(lr, ...).
  void step(const Tensor& group_lrs, double grad_scale, const Tensor& control);
  // Each group's learning rate for the schedule's lr: lr * lr_mult, as the kernels take it (f32).
  std::vector<float> group_learning_rates(double lr) const;
  // Drops every parameter's gradient.
  void zero_grad();

  // Freezes (or unfreezes) the parameters whose names start with one of the prefixes (see
  // has_name_prefix); a prefix that matches no parameter is a cnn::Error naming it.
  void set_frozen(const std::vector<std::string>& prefixes, bool frozen);
  bool is_frozen(const std::string& name) const { return frozen_.count(name) != 0; }

  // Registers a low-precision copy of a parameter (same shape and device, f16 or bf16).
  void set_low_precision_copy(const std::string& name, const Tensor& copy);

  // Trainable (unfrozen) parameters' gradients, for unscaling and clipping.
  std::vector<Tensor> gradients() const;
  const std::vector<ParamGroup>& groups() const { return groups_; }
  // The memory a step reads and writes, besides gradients: each parameter's weights, state, step
  // count and low-precision copy (null where there is none), and whether it is frozen. A captured
  // step (train/step_graph.h) is valid only while this stays the same.
  std::vector<const void*> memory_used() const;
  // Each parameter's state tensors (handles, not copies of the values).
  struct ParamState {
    Tensor state1, state2;  // SGD: momentum buffer; AdamW: exp_avg, exp_avg_sq
    Tensor steps;           // 0-d f32 on the parameter's device: steps applied (kernels count them)
    Tensor copy;
  };
  // The state as it is, and putting it back: a failed capture of the step (train/step_graph.h)
  // undoes the state it made but never filled.
  std::map<std::string, ParamState> state_handles() const { return state_; }
  void restore_state_handles(std::map<std::string, ParamState> handles) { state_ = std::move(handles); }
  // Steps taken by a parameter (0 before its first; read from its device).
  int64_t steps_of(const std::string& name) const;

  // Optimizer state as named tensors ("<param>.<state>", "<param>.step"), for checkpoints, and its
  // restoration (a missing or mis-shaped tensor is a cnn::Error naming it).
  io::NamedTensors state() const;
  void load_state(const io::NamedTensors& state);

 protected:
  // Names of the state tensors, e.g. {"momentum_buffer"} or {"exp_avg", "exp_avg_sq"}.
  virtual std::vector<std::string> state_names() const = 0;
  // Whether a parameter needs state1 (SGD without momentum does not).
  virtual int states_used() const = 0;
  // What a step of one group's tensors uses besides the optimizer's own hyper-parameters.
  struct GroupUpdate {
    double lr, weight_decay, grad_scale;
    DType grad_dtype, copy_dtype;
    const float* control;  // the step's control block, or null
    const float* lr_from;  // the learning rate on the device (instead of lr), or null
    // The kernel arguments these fill (SgdArgs or AdamWArgs), the rest left at their defaults.
    template <class Args>
    Args kernel_args() const {
      Args a;
      a.lr = static_cast<float>(lr);
      a.weight_decay = static_cast<float>(weight_decay);
      a.grad_scale = static_cast<float>(grad_scale);
      a.grad_dtype = grad_dtype;
      a.copy_dtype = copy_dtype;
      a.control = control;
      a.lr_from = lr_from;
      return a;
    }
  };
  // Updates one group: `table` holds its trainable slots (state and step counters allocated), all
  // with gradients of u.grad_dtype and copies of u.copy_dtype.
  virtual void update(SlotTable& table, const GroupUpdate& u) = 0;

 private:
  // Both steps: group g's learning rate is lrs[g], or the f32 at group_lrs[g] on the device.
  void step_groups(const std::vector<float>& lrs, const Tensor& group_lrs, double grad_scale, const Tensor& control);

  std::vector<ParamGroup> groups_;
  std::map<std::string, ParamState> state_;
  std::set<std::string> frozen_;
};

}  // namespace cnn::train
