// The pooled classifier head of the zoo's models (see pooled_head.h).
#include "layers/models/pooled_head.h"

#include "layers/dropout.h"
#include "layers/pool.h"

namespace cnn {

void add_pooled_head(Sequential& net, int pool_size, const std::string& head_name, std::unique_ptr<Module> head,
                     double dropout) {
  net.add("avgpool", std::make_unique<AdaptiveAvgPool2d>(pool_size, pool_size));
  net.add("flatten", std::make_unique<Flatten>());
  if (dropout > 0) net.add("dropout", std::make_unique<Dropout>(dropout));
  net.add(head_name, std::move(head))->mark_as_head();
}

}  // namespace cnn
