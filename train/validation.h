// Validation at the end of an epoch: loss, top-1 and top-5 accuracy and the confusion matrix of a
// model over a loader, and confusion.json (per-class accuracy and the matrix) in the run folder.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "data/loader.h"
#include "engine/distributed/communicator.h"
#include "layers/module.h"

namespace cnn::train {

// A validation image the model got wrong, with how sure it was.
struct Mistake {
  double confidence = 0;  // softmax probability of the predicted class
  int64_t truth = 0, predicted = 0;
  Tensor image;  // [1, H, W, C] on the CPU, normalised as the model saw it
};

struct Validation {
  double loss = 0, top1 = 0, top5 = 0;  // mean cross-entropy; accuracies in percent
  int64_t images = 0, corrupt = 0;      // images evaluated, and unreadable ones left out
  std::vector<int64_t> confusion;       // [truth * classes + predicted]
  std::vector<Mistake> mistakes;        // the most confident ones, most confident first (this rank's)
};

// Runs the model in eval mode without recording (and back in train mode after). `epoch` keys the
// loader's epoch (the validation loader does not shuffle). In a data-parallel run each rank
// validates its shard and the sums (loss, hits, the confusion matrix) are reduced over `comm`, so
// that every rank returns the figures of the whole validation set.
// `on_batch(done)` is called after each batch (for a progress display). The `keep_mistakes` most
// confident mistakes of this rank's shard are kept with their images.
Validation validate(Module& model, data::Loader& loader, int64_t classes, const Device& device, int64_t epoch,
                    distributed::Communicator& comm, const std::function<void(int64_t)>& on_batch = {},
                    int64_t keep_mistakes = 0);

// confusion.json: epoch, loss, top-1, top-5, class names, per-class top-1 and the matrix (rows:
// truth, columns: predicted).
void write_confusion(const std::filesystem::path& path, const Validation& validation, const std::vector<std::string>& names,
                     int64_t epoch);

}  // namespace cnn::train
