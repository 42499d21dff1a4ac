// Grouping of parameters by head membership and rank.
#include "train/optim/param_groups.h"

namespace cnn::train {

bool has_name_prefix(const std::string& name, const std::string& prefix) {
  if (prefix.empty() || name.compare(0, prefix.size(), prefix) != 0) return false;
  return name.size() == prefix.size() || name[prefix.size()] == '.';
}

std::vector<ParamGroup> make_param_groups(const io::NamedTensors& params, const ParamGroupOptions& options) {
  ParamGroup groups[4] = {{"decay", {}, 1.0, options.weight_decay},
                          {"no_decay", {}, 1.0, 0.0},
                          {"head_decay", {}, options.head_lr_mult, options.weight_decay},
                          {"head_no_decay", {}, options.head_lr_mult, 0.0}};
  for (const auto& [name, tensor] : params) {
    const bool head = has_name_prefix(name, options.head_prefix);
    const bool no_decay = options.no_decay_1d && tensor.dim() <= 1;
    groups[(head ? 2 : 0) + (no_decay ? 1 : 0)].params.emplace_back(name, tensor);
  }
  std::vector<ParamGroup> out;
  for (ParamGroup& g : groups)
    if (!g.params.empty()) out.push_back(std::move(g));
  return out;
}

}  // namespace cnn::train
