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

// The confusion matrix is kept up to this many classes (8 MiB of counts; ImageNet-1k's 1000 fit).
// Beyond it (ImageNet-21k's 21,843 classes would need 3.8 GB) only the per-class counts are kept:
// per-class top-1 stays, the matrix and its picture are left out and confusion.json says so.
inline constexpr int64_t kConfusionMatrixMaxClasses = 1024;

// The bytes a validation keeps for `classes` classes (the matrix when kept, and the per-class
// counts), for the memory estimate.
uint64_t validation_record_bytes(int64_t classes);

struct Validation {
  double loss = 0, top1 = 0, top5 = 0;  // mean cross-entropy; accuracies in percent (top5 NaN for <= 5 classes)
  int64_t images = 0, corrupt = 0;      // images evaluated, and unreadable ones left out
  std::vector<int64_t> confusion;       // [truth * classes + predicted]; empty above kConfusionMatrixMaxClasses
  std::vector<int64_t> class_images, class_hits;  // per true class: images, and those predicted right
  std::vector<Mistake> mistakes;        // the most confident ones, most confident first (this rank's)
  bool stopped = false;  // ended early by `stop` (or the loader's stop_waiting): the figures are partial
};

// Runs the model in eval mode without recording (and back in train mode after). `epoch` keys the
// loader's epoch (the validation loader does not shuffle). In a data-parallel run each rank
// validates its shard and the sums (loss, hits, the confusion matrix) are reduced over `comm`, so
// that every rank returns the figures of the whole validation set.
// `on_batch(done)` is called after each batch (for a progress display). The `keep_mistakes` most
// confident mistakes of this rank's shard are kept with their images. `stop` is asked before each
// batch (Ctrl-C): when it says true the pass ends there, marked stopped. Only for one process: ranks
// stopping at different batches would not meet in the reduction.
Validation validate(Module& model, data::Loader& loader, int64_t classes, const Device& device, int64_t epoch,
                    distributed::Communicator& comm, const std::function<void(int64_t)>& on_batch = {},
                    int64_t keep_mistakes = 0, const std::function<bool()>& stop = {});

// confusion.json: epoch, loss, top-1, top-5, class names, per-class top-1 and the matrix (rows:
// truth, columns: predicted), or, above kConfusionMatrixMaxClasses, why the matrix is left out.
void write_confusion(const std::filesystem::path& path, const Validation& validation, const std::vector<std::string>& names,
                     int64_t epoch);

}  // namespace cnn::train
