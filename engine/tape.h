// The autograd tape. While a Tape::Recording scope is open on a thread, each differentiable op
// whose inputs need gradients appends a record: the op's name, its inputs and outputs, and its
// backward rule (a closure holding whatever the rule saved from the forward pass).
// backward(loss) runs the records in reverse, accumulating gradients into leaves' .grad, and frees
// each record's saved tensors as soon as it has run, so a tape can be walked back only once.
//
//   cnn::Tape tape;
//   { cnn::Tape::Recording rec(tape); loss = cross_entropy(linear(x, w, b), labels); }
//   tape.backward(loss);   // w.grad(), b.grad() now hold d loss / d w, d loss / d b
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace cnn {

// A backward rule: gradients of the outputs in (undefined where an output got none) -> gradients of
// the inputs (undefined where an input needs none).
using BackwardRule = std::function<std::vector<Tensor>(const std::vector<Tensor>& grad_outputs)>;

class Tape {
 public:
  Tape() = default;
  Tape(const Tape&) = delete;
  Tape& operator=(const Tape&) = delete;

  // RAII scope that makes `tape` the recording tape of this thread (scopes nest).
  class Recording {
   public:
    explicit Recording(Tape& tape);
    ~Recording();
    Recording(const Recording&) = delete;
    Recording& operator=(const Recording&) = delete;

   private:
    Tape* previous_;
  };

  // Gradients of a scalar loss (or of any tensor with an explicit seed gradient of its shape).
  void backward(const Tensor& loss, const Tensor& seed = Tensor());
  // Several outputs, each with its seed gradient.
  void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& seeds);

  // Called during backward once per leaf that receives a gradient, as soon as that gradient is final:
  // after the earliest record that takes the leaf has run (PyTorch's post-accumulate-grad hook;
  // distributed training starts a gradient bucket's all-reduce from it). Leaves used inside a
  // checkpointed segment are reported by the segment's replay, unless an earlier record of this
  // tape also takes them. A gradient that arrives after its leaf was reported (a parameter used in
  // two checkpointed segments) is a cnn::Error. Leaves no record reaches are not reported.
  using GradientReadyHook = std::function<void(const Tensor& leaf)>;
  void set_gradient_ready_hook(GradientReadyHook hook) { ready_hook_ = std::move(hook); }

  size_t size() const { return records_.size(); }
  bool consumed() const { return consumed_; }
  void clear();  // drops all records; the tape can record again

  // Called by ops (through record_op): appends a record.
  void add(std::string op, std::vector<Tensor> inputs, std::vector<Tensor> outputs, BackwardRule rule);

 private:
  struct Record {
    std::string op;
    std::vector<Tensor> inputs;      // only those that need gradients are kept alive...
    std::vector<uint64_t> input_ids;  // ...but every input's id is known
    std::vector<uint64_t> output_ids;
    std::vector<Shape> output_shapes;
    BackwardRule rule;
  };
  std::vector<Record> records_;
  bool consumed_ = false;
  GradientReadyHook ready_hook_;
  // Leaves of this tape that are not the user's (a checkpoint replay's copies of its inputs): never
  // reported to the hook.
  std::vector<uint64_t> internal_leaves_;
  friend std::vector<Tensor> checkpoint(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                                        const std::vector<Tensor>& inputs);
};

// The tape recording on this thread, or null (also null inside a NoGrad scope).
Tape* recording_tape();

// RAII scope in which nothing is recorded (evaluation, optimizer steps).
class NoGrad {
 public:
  NoGrad();
  ~NoGrad();
  NoGrad(const NoGrad&) = delete;
  NoGrad& operator=(const NoGrad&) = delete;

 private:
  bool previous_;
};

// For op implementations: true when a tape is recording and some input requires gradients.
bool needs_record(std::initializer_list<const Tensor*> inputs);
bool needs_record(const std::vector<Tensor>& inputs);

// For op implementations: records the op if needed and marks its outputs as requiring gradients.
void record_op(const char* op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
               BackwardRule rule);

// For backward rules: the gradient the tape has already gathered for input `index` of the rule
// running on this thread, when the rule may add its own gradient into it in place: nothing else
// refers to it and the input appears once among the record's inputs. Otherwise (also outside a
// backward rule) an undefined tensor. A rule that adds into it returns that same tensor as the
// input's gradient; the tape then keeps it as the sum instead of adding the two, which saves a pass
// over memory wherever a tensor feeds two ops (a residual block's input).
Tensor gradient_to_accumulate(size_t index);

// Gradient checkpointing: runs fn(inputs) without recording its inside and records one entry that,
// during backward, replays fn on the saved inputs under a nested tape and back-propagates through
// it. Only the inputs are kept between forward and backward, trading compute for memory.
// Parameters used inside fn receive their gradients as usual.
using CheckpointFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs);

}  // namespace cnn
