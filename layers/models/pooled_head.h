// The end every model of the zoo shares: "avgpool" (adaptive average pool to pool_size x pool_size),
// "flatten", and the classifier head under its torchvision name ("fc" or "classifier"), marked as the
// head so that its parameters carry in_head. A positive `dropout` puts a "dropout" layer between
// flatten and the head (it has no parameters, so the state_dict names stay torchvision's).
#pragma once
#include <memory>
#include <string>

#include "layers/sequential.h"

namespace cnn {

void add_pooled_head(Sequential& net, int pool_size, const std::string& head_name, std::unique_ptr<Module> head,
                     double dropout = 0);

}  // namespace cnn
