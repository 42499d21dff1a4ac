// A dataset seen through another class list (see relabelled_dataset.h).
#include "data/relabelled_dataset.h"

#include "engine/error.h"

namespace cnn::data {

RelabelledDataset::RelabelledDataset(DatasetPtr inner, std::vector<int64_t> label_of, std::vector<std::string> class_names)
    : inner_(std::move(inner)), label_of_(std::move(label_of)) {
  CNN_CHECK(inner_ && static_cast<int64_t>(label_of_.size()) == inner_->num_classes(), "RelabelledDataset: ", label_of_.size(),
            " labels mapped for a dataset of ", inner_ ? inner_->num_classes() : 0, " classes");
  class_names_ = std::move(class_names);
  for (const int64_t label : label_of_)
    CNN_CHECK(label >= 0 && label < num_classes(), "RelabelledDataset: label ", label, " is outside the ", num_classes(), " classes");
}

int64_t RelabelledDataset::label(int64_t index) const { return label_of_[static_cast<size_t>(inner_->label(index))]; }

}  // namespace cnn::data
