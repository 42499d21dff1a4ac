// Recomputing BatchNorm statistics (see update_bn.h).
#include "train/update_bn.h"

#include <vector>

#include "engine/tape.h"
#include "layers/batch_norm.h"

namespace cnn::train {

int update_batch_norm(Module& model, const std::function<Tensor()>& next_images) {
  std::vector<BatchNorm2d*> norms;
  for (auto& [name, module] : model.named_modules())
    if (auto* bn = dynamic_cast<BatchNorm2d*>(module)) norms.push_back(bn);
  if (norms.empty()) return 0;
  for (BatchNorm2d* bn : norms) {
    bn->reset_running_stats();
    bn->set_cumulative_average(true);
  }
  model.train();
  {
    NoGrad no_grad;
    for (Tensor images = next_images(); images.defined(); images = next_images()) model.forward(images);
  }
  for (BatchNorm2d* bn : norms) bn->set_cumulative_average(false);
  return static_cast<int>(norms.size());
}

}  // namespace cnn::train
