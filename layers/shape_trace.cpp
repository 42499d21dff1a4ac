// The shape pass over the module tree (see shape_trace.h).
#include "layers/shape_trace.h"

#include "engine/error.h"
#include "layers/module.h"

namespace cnn {

Shape ShapeTrace::run(const Module& module, const std::string& name, const Shape& input) {
  LayerSummary row;
  row.name = open_.empty() || layers_[open_.back()].name.empty() ? name : layers_[open_.back()].name + "." + name;
  row.type = module.type_name();
  row.depth = static_cast<int>(open_.size());
  row.input = input;
  row.params = module.parameter_count();
  row.leaf = module.children().empty();
  layers_.push_back(row);
  open_.push_back(layers_.size() - 1);
  const size_t index = open_.back();
  Shape output;
  try {
    output = module.infer_shape(input, *this);
  } catch (...) {
    open_.pop_back();
    throw;
  }
  open_.pop_back();
  layers_[index].output = output;
  return output;
}

void ShapeTrace::add_macs(int64_t macs) {
  for (size_t row : open_) layers_[row].macs += macs;
}

std::string ShapeTrace::where() const {
  if (open_.empty()) return "<no module>";
  const LayerSummary& row = layers_[open_.back()];
  return (row.name.empty() ? std::string("model") : row.name) + " (" + row.type + ")";
}

ShapeTrace trace_shapes(const Module& model, const Shape& input) {
  ShapeTrace trace;
  trace.run(model, "", input);
  return trace;
}

}  // namespace cnn
