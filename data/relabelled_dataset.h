// A dataset seen through another class list: each sample's label mapped by a table (a validation
// set whose class folders are a subset of the training set's, or in another order, scored on the
// training set's class indices, as ImageFolder users do by sharing one class list).
#pragma once
#include <string>
#include <vector>

#include "data/dataset.h"

namespace cnn::data {

class RelabelledDataset final : public Dataset {
 public:
  // `label_of[k]` is the new label of the inner dataset's class k; `class_names` the new class list.
  RelabelledDataset(DatasetPtr inner, std::vector<int64_t> label_of, std::vector<std::string> class_names);

  int64_t size() const override { return inner_->size(); }
  int64_t label(int64_t index) const override;
  Image load(int64_t index, const DecodeOptions& options) const override { return inner_->load(index, options); }
  std::string source(int64_t index) const override { return inner_->source(index); }

 private:
  DatasetPtr inner_;
  std::vector<int64_t> label_of_;
};

}  // namespace cnn::data
