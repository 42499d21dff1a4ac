// The shape pass: a walk of the module tree that infers every module's output shape and counts its
// parameters and multiply-accumulates (MACs) for an input shape, without allocating or running
// anything. cnn_summary prints it; models use it to check an input size before training.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/shape.h"
#include "kernels/common/window.h"

namespace cnn {

class Module;

// One row of the trace: a module, in pre-order.
struct LayerSummary {
  std::string name;  // dotted path, "" for the traced root
  std::string type;  // "Conv2d", "Bottleneck", ...
  int depth = 0;     // 0 for the root, 1 for its children, ...
  Shape input;
  Shape output;
  int64_t params = 0;  // parameters of the module and all below it
  int64_t macs = 0;    // multiply-accumulates of the module and all below it, for this input
  bool leaf = true;    // no children
};

class ShapeTrace {
 public:
  // Infers the output shape of `module` (named `name` inside the module being traced) and records its row.
  Shape run(const Module& module, const std::string& name, const Shape& input);
  // Called by leaf modules from infer_shape: MACs of the module being traced (added to its ancestors too).
  void add_macs(int64_t macs);
  // "layer1.0.conv1 (Conv2d)": the module being traced, for error messages.
  std::string where() const;

  const std::vector<LayerSummary>& layers() const { return layers_; }
  int64_t total_macs() const { return layers_.empty() ? 0 : layers_.front().macs; }
  int64_t total_params() const { return layers_.empty() ? 0 : layers_.front().params; }
  Shape output() const { return layers_.empty() ? Shape() : layers_.front().output; }

 private:
  std::vector<LayerSummary> layers_;
  std::vector<size_t> open_;  // rows of the modules being traced, outermost first
};

// Traces a whole model (its row is named "" at depth 0). Shape errors are cnn::Errors naming the layer.
ShapeTrace trace_shapes(const Module& model, const Shape& input);

// The leaves' output size of a convolution or pooling window is window_output_size of
// kernels/common/window.h, the function the ops use.

}  // namespace cnn
