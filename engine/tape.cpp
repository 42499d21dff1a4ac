#include "engine/tape.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "engine/ops.h"

namespace cnn {

namespace {
thread_local Tape* current_tape = nullptr;
thread_local bool grad_enabled = true;

// Re-enables recording inside a backward pass (which otherwise runs without a tape).
class EnableGrad {
 public:
  EnableGrad() : previous_(grad_enabled) { grad_enabled = true; }
  ~EnableGrad() { grad_enabled = previous_; }

 private:
  bool previous_;
};

// Tells the gradient-ready hook when each leaf's gradient is final during one backward walk (see
// Tape::set_gradient_ready_hook). A checkpointed segment's replay runs its own walk whose tracker
// has the outer walk's as parent: it leaves to the parent the leaves that an earlier outer record
// (one not walked yet) also takes.
class ReadyTracker {
 public:
  ReadyTracker(const Tape::GradientReadyHook* own_hook, ReadyTracker* parent, const std::vector<uint64_t>& internal_leaves)
      : hook_(own_hook && *own_hook ? own_hook : parent ? parent->hook_ : nullptr), parent_(parent),
        reported_(parent ? parent->reported_ : &own_reported_), internal_(internal_leaves) {}
  bool active() const { return hook_ != nullptr; }
  // Leaf `id` is taken by record `index` (records are added in order).
  void note_use(uint64_t id, size_t index) { earliest_use_.try_emplace(id, index); }
  void at_record(size_t index) { position_ = index; }
  // Reports the leaves whose earliest record is `index`, which has just run.
  void after_record(size_t index, const std::vector<Tensor>& leaves) {
    for (const Tensor& leaf : leaves)
      if (leaf.defined() && earliest_use_.at(leaf.id()) == index) report(leaf);
  }
  void report(const Tensor& leaf) {
    if (!hook_ || !leaf.grad().defined()) return;
    if (std::find(internal_.begin(), internal_.end(), leaf.id()) != internal_.end()) return;
    if (parent_ && parent_->still_to_come(leaf.id())) return;  // the outer walk reports it later
    if (!reported_->insert(leaf.id()).second) return;
    (*hook_)(leaf);
  }
  // A gradient about to be added into a leaf already reported ready.
  void check_not_reported(const Tensor& leaf) const {
    CNN_CHECK(!hook_ || reported_->count(leaf.id()) == 0, "a gradient reached the leaf ", describe(leaf),
              " after it was reported final (it is used in two checkpointed segments, or inside one and after it); "
              "distributed training cannot start its all-reduce early: turn gradient checkpointing off for that "
              "part of the model, or do not share the parameter");
  }

 private:
  bool still_to_come(uint64_t id) const {
    const auto it = earliest_use_.find(id);
    if (it != earliest_use_.end() && it->second <= position_) return true;
    return parent_ && parent_->still_to_come(id);
  }
  const Tape::GradientReadyHook* hook_;
  ReadyTracker* parent_;
  std::unordered_set<uint64_t> own_reported_;
  std::unordered_set<uint64_t>* reported_;
  const std::vector<uint64_t>& internal_;
  std::unordered_map<uint64_t, size_t> earliest_use_;
  size_t position_ = 0;
};
thread_local ReadyTracker* current_tracker = nullptr;

// The gradients gathered so far for the inputs of the rule running on this thread that it may add
// into (gradient_to_accumulate), set around each rule.
thread_local const std::vector<Tensor>* accumulation_targets = nullptr;

bool exclusively_held(const Tensor& t) {
  return t.defined() && t.impl().use_count() == 1 && t.impl()->storage.use_count() == 1;
}

bool same_memory(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.impl()->storage == b.impl()->storage && a.data() == b.data();
}

// Adds g into a leaf's .grad. The first gradient is kept as is when nothing else refers to it;
// otherwise it is copied, so that in-place updates of .grad never reach another tensor.
void accumulate_into_leaf(const Tensor& leaf, Tensor g) {
  if (current_tracker) current_tracker->check_not_reported(leaf);
  Tensor current = leaf.grad();
  if (!current.defined()) {
    const bool exclusive = g.impl().use_count() == 1 && g.impl()->storage.use_count() == 1;
    leaf.set_grad(exclusive ? g : g.clone());
    return;
  }
  add_(current, g);
}
}  // namespace

Tape::Recording::Recording(Tape& tape) : previous_(current_tape) { current_tape = &tape; }
Tape::Recording::~Recording() { current_tape = previous_; }

NoGrad::NoGrad() : previous_(grad_enabled) { grad_enabled = false; }
NoGrad::~NoGrad() { grad_enabled = previous_; }

Tape* recording_tape() { return grad_enabled ? current_tape : nullptr; }

bool needs_record(std::initializer_list<const Tensor*> inputs) {
  if (!recording_tape()) return false;
  for (const Tensor* t : inputs)
    if (t && t->requires_grad()) return true;
  return false;
}

bool needs_record(const std::vector<Tensor>& inputs) {
  if (!recording_tape()) return false;
  for (const Tensor& t : inputs)
    if (t.requires_grad()) return true;
  return false;
}

void record_op(const char* op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
               BackwardRule rule) {
  if (!needs_record(inputs)) return;
  recording_tape()->add(op, inputs, outputs, std::move(rule));
}

void Tape::add(std::string op, std::vector<Tensor> inputs, std::vector<Tensor> outputs, BackwardRule rule) {
  CNN_CHECK(!consumed_, "op ", op, " recorded on a tape whose backward already ran; call clear() first");
  Record r;
  r.op = std::move(op);
  r.rule = std::move(rule);
  for (Tensor& t : inputs) {
    const bool wants = t.requires_grad();
    r.input_ids.push_back(wants ? t.id() : 0);
    // Leaves are kept so that their .grad can be reached; other inputs are known by id alone.
    r.inputs.push_back(wants && t.is_leaf() ? t : Tensor());
  }
  for (Tensor& t : outputs) {
    if (!t.defined() || !is_floating(t.dtype())) {  // e.g. the indices of max_last
      r.output_ids.push_back(0);
      r.output_shapes.emplace_back();
      continue;
    }
    t.impl()->requires_grad = true;
    t.impl()->is_leaf = false;
    r.output_ids.push_back(t.id());
    r.output_shapes.push_back(t.shape());
  }
  records_.push_back(std::move(r));
}

void Tape::clear() {
  records_.clear();
  consumed_ = false;
}

void Tape::backward(const Tensor& loss, const Tensor& seed) {
  CNN_CHECK(loss.defined(), "backward of an undefined tensor");
  Tensor s = seed;
  if (!s.defined()) {
    CNN_CHECK(loss.numel() == 1, "backward of a non-scalar tensor ", describe(loss),
              " needs a seed gradient of the same shape (or reduce it to a scalar loss with sum or mean)");
    s = Tensor::ones(loss.shape(), loss.dtype(), loss.device());
  }
  backward(std::vector<Tensor>{loss}, std::vector<Tensor>{s});
}

void Tape::backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& seeds) {
  CNN_CHECK(!consumed_, "backward called twice on the same tape: its records (and the tensors they saved) were "
            "freed by the first backward. Record the forward pass again on a fresh tape (or call clear() first)");
  CNN_CHECK(outputs.size() == seeds.size(), "backward: ", outputs.size(), " outputs but ", seeds.size(), " seeds");
  consumed_ = true;
  NoGrad no_grad;  // backward rules are not themselves recorded
  ReadyTracker ready(&ready_hook_, current_tracker, internal_leaves_);
  ReadyTracker* const outer_tracker = current_tracker;
  current_tracker = &ready;
  struct RestoreTracker {
    ReadyTracker* previous;
    ~RestoreTracker() { current_tracker = previous; }
  } restore{outer_tracker};
  if (ready.active())
    for (size_t i = 0; i < records_.size(); ++i)
      for (const Tensor& leaf : records_[i].inputs)
        if (leaf.defined()) ready.note_use(leaf.id(), i);
  std::vector<Tensor> seeded_leaves;

  std::unordered_map<uint64_t, Tensor> grads;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    if (!seeds[i].defined() || !out.requires_grad()) continue;
    CNN_CHECK(seeds[i].shape() == out.shape(), "backward: seed gradient ", describe(seeds[i]),
              " does not match its output ", describe(out));
    if (out.is_leaf()) {
      accumulate_into_leaf(out, seeds[i]);
      seeded_leaves.push_back(out);
    } else {
      Tensor& slot = grads[out.id()];
      slot = slot.defined() ? cnn::add(slot, seeds[i]) : seeds[i];
    }
  }

  for (size_t index = records_.size(); index-- > 0;) {
    Record& r = records_[index];
    ready.at_record(index);
    std::vector<Tensor> grad_outputs(r.output_ids.size());
    bool any = false;
    for (size_t j = 0; j < r.output_ids.size(); ++j) {
      auto found = grads.find(r.output_ids[j]);
      if (found == grads.end()) continue;
      grad_outputs[j] = std::move(found->second);
      grads.erase(found);
      any = true;
    }
    if (any) {
      // The gathered gradients a rule may add into: held by nothing but the tape, of an input that
      // appears once in this record.
      std::vector<Tensor> targets(r.input_ids.size());
      for (size_t j = 0; j < r.input_ids.size(); ++j) {
        if (r.input_ids[j] == 0 || r.inputs[j].defined()) continue;  // leaves accumulate into .grad
        if (std::count(r.input_ids.begin(), r.input_ids.end(), r.input_ids[j]) != 1) continue;
        auto found = grads.find(r.input_ids[j]);
        if (found != grads.end() && exclusively_held(found->second)) targets[j] = found->second;
      }
      const std::vector<Tensor>* outer_targets = accumulation_targets;
      accumulation_targets = &targets;
      struct RestoreTargets {
        const std::vector<Tensor>* previous;
        ~RestoreTargets() { accumulation_targets = previous; }
      } restore_targets{outer_targets};
      std::vector<Tensor> grad_inputs = r.rule(grad_outputs);
      CNN_CHECK(grad_inputs.size() == r.input_ids.size(), "backward rule of ", r.op, " returned ",
                grad_inputs.size(), " gradients for ", r.input_ids.size(), " inputs");
      for (size_t j = 0; j < grad_inputs.size(); ++j) {
        if (r.input_ids[j] == 0 || !grad_inputs[j].defined()) continue;
        Tensor g = std::move(grad_inputs[j]);
        if (r.inputs[j].defined()) {
          CNN_CHECK(g.shape() == r.inputs[j].shape(), "backward rule of ", r.op, " produced gradient ", describe(g),
                    " for input ", describe(r.inputs[j]));
          accumulate_into_leaf(r.inputs[j], std::move(g));
        } else {
          Tensor& slot = grads[r.input_ids[j]];
          if (same_memory(g, targets[j])) continue;  // the rule added into the slot itself
          slot = slot.defined() ? cnn::add(slot, g) : std::move(g);
        }
      }
    }
    r.rule = nullptr;  // frees what the forward pass saved for this op
    if (ready.active()) ready.after_record(index, r.inputs);
    r.inputs.clear();
  }
  for (const Tensor& leaf : seeded_leaves) ready.report(leaf);  // a seed no record took
}

Tensor gradient_to_accumulate(size_t index) {
  if (accumulation_targets == nullptr || index >= accumulation_targets->size()) return Tensor();
  return (*accumulation_targets)[index];
}

std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs) {
  Tape* tape = recording_tape();
  if (!tape) return fn(inputs);
  std::vector<Tensor> outputs;
  {
    NoGrad no_grad;  // nothing inside fn is recorded: its intermediates are freed as it goes
    outputs = fn(inputs);
  }
  // Parameters inside fn may need gradients even when no input does, so the segment is always
  // recorded; its outputs are marked as needing gradients by Tape::add.
  std::vector<Tensor> saved;
  saved.reserve(inputs.size());
  for (const Tensor& t : inputs) saved.push_back(t.detach());
  std::vector<bool> input_wants;
  for (const Tensor& t : inputs) input_wants.push_back(t.requires_grad());

  BackwardRule rule = [fn, saved, input_wants](const std::vector<Tensor>& grad_outputs) {
    std::vector<Tensor> replay_inputs;
    for (size_t i = 0; i < saved.size(); ++i) {
      Tensor t = saved[i].detach();
      if (input_wants[i]) t.requires_grad_(true);
      replay_inputs.push_back(t);
    }
    Tape inner;
    for (const Tensor& t : replay_inputs) inner.internal_leaves_.push_back(t.id());
    std::vector<Tensor> replay_outputs;
    {
      EnableGrad enable;
      Tape::Recording rec(inner);
      replay_outputs = fn(replay_inputs);
    }
    CNN_CHECK(replay_outputs.size() == grad_outputs.size(), "checkpoint: the replay returned ",
              replay_outputs.size(), " outputs, the forward ", grad_outputs.size());
    inner.backward(replay_outputs, grad_outputs);
    std::vector<Tensor> grads;
    for (size_t i = 0; i < replay_inputs.size(); ++i) grads.push_back(input_wants[i] ? replay_inputs[i].grad() : Tensor());
    return grads;
  };
  tape->add("checkpoint", inputs, outputs, std::move(rule));
  return outputs;
}

}  // namespace cnn
