// Parameter groups: which parameters train with which learning-rate multiplier and weight decay.
// The usual recipe: no weight decay for 1-D parameters (BatchNorm weights and biases, biases), and
// a learning-rate multiplier for the classifier head (fine-tuning).
#pragma once
#include <string>
#include <vector>

#include "engine/io/named_tensors.h"

namespace cnn::train {

struct ParamGroup {
  std::string name;  // "decay", "no_decay", "head_decay", "head_no_decay"
  io::NamedTensors params;
  double lr_mult = 1.0;
  double weight_decay = 0.0;
};

struct ParamGroupOptions {
  double weight_decay = 0.0;
  bool no_decay_1d = true;   // no weight decay for parameters of rank <= 1
  std::string head_prefix;   // parameters whose name starts with this are the head ("" : none)
  double head_lr_mult = 1.0;
};

// Splits named parameters into groups (empty groups are left out), keeping their order.
std::vector<ParamGroup> make_param_groups(const io::NamedTensors& params, const ParamGroupOptions& options);

// True when `name` is `prefix` or starts with `prefix` followed by '.' ("layer1" matches
// "layer1.0.conv1.weight" but not "layer10.weight").
bool has_name_prefix(const std::string& name, const std::string& prefix);

}  // namespace cnn::train
