// Validation and confusion.json (see validation.h).
#include "train/validation.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/cnn.h"
#include "engine/io/atomic_file.h"
#include "train/log/json_text.h"

namespace cnn::train {

namespace {
// Keeps the `capacity` most confident mistakes seen, most confident first.
void consider_mistake(std::vector<Mistake>& kept, size_t capacity, double confidence, int64_t truth, int64_t predicted,
                      const Tensor& batch_on_cpu, int64_t index) {
  if (capacity == 0 || (kept.size() == capacity && confidence <= kept.back().confidence)) return;
  const int64_t h = batch_on_cpu.size(1), w = batch_on_cpu.size(2), c = batch_on_cpu.size(3);
  Tensor image = Tensor::empty({1, h, w, c}, batch_on_cpu.dtype());
  const size_t bytes = image.nbytes();
  std::memcpy(image.data(), static_cast<const char*>(batch_on_cpu.data()) + static_cast<size_t>(index) * bytes, bytes);
  const auto at = std::find_if(kept.begin(), kept.end(), [&](const Mistake& m) { return confidence > m.confidence; });
  kept.insert(at, Mistake{confidence, truth, predicted, image});
  if (kept.size() > capacity) kept.pop_back();
}
}  // namespace

Validation validate(Module& model, data::Loader& loader, int64_t classes, const Device& device, int64_t epoch,
                    distributed::Communicator& comm, const std::function<void(int64_t)>& on_batch, int64_t keep_mistakes,
                    const std::function<bool()>& stop) {
  CNN_CHECK(!stop || comm.world_size() == 1, "validate: a stop check is for one process, not ", comm.world_size(), " ranks");
  NoGrad no_grad;
  model.eval();
  Validation result;
  const bool keep_matrix = classes <= kConfusionMatrixMaxClasses;
  if (keep_matrix) result.confusion.assign(static_cast<size_t>(classes * classes), 0);
  result.class_images.assign(static_cast<size_t>(classes), 0);
  result.class_hits.assign(static_cast<size_t>(classes), 0);
  double loss_sum = 0;
  int64_t seen = 0, corrupt = 0, top1 = 0, top5 = 0, batches = 0;
  loader.start_epoch(epoch);
  while (true) {
    if (stop && stop()) {
      result.stopped = true;
      break;
    }
    const std::optional<data::Batch> batch = loader.next();
    if (!batch) {
      result.stopped = loader.wait_stopped();
      break;
    }
    corrupt += batch->skipped;
    if (batch->size() == 0) continue;
    const Tensor logits = model.forward(batch->images.to(device)).to(DType::f32);
    const Tensor labels = batch->labels.to(device);
    loss_sum += cross_entropy(logits, labels).item() * static_cast<double>(batch->size());
    const std::vector<double> scores = logits.to_doubles(), truth = batch->labels.to_doubles();
    Tensor images_on_cpu;  // fetched once a mistake is kept from this batch
    for (int64_t i = 0; i < batch->size(); ++i) {
      const double* row = scores.data() + i * classes;
      const int64_t label = static_cast<int64_t>(truth[static_cast<size_t>(i)]);
      int64_t higher = 0, best = 0;
      for (int64_t k = 0; k < classes; ++k) {
        if (row[k] > row[label]) ++higher;
        if (row[k] > row[best]) best = k;
      }
      top1 += higher == 0;
      top5 += higher < 5;
      if (keep_matrix) ++result.confusion[static_cast<size_t>(label * classes + best)];
      ++result.class_images[static_cast<size_t>(label)];
      result.class_hits[static_cast<size_t>(label)] += best == label;
      if (best != label && keep_mistakes > 0) {
        double normaliser = 0;  // softmax of the best class: 1 / sum exp(row - row[best])
        for (int64_t k = 0; k < classes; ++k) normaliser += std::exp(row[k] - row[best]);
        const double confidence = 1.0 / normaliser;
        const auto capacity = static_cast<size_t>(keep_mistakes);
        if (result.mistakes.size() < capacity || confidence > result.mistakes.back().confidence) {
          if (!images_on_cpu.defined()) images_on_cpu = batch->images.to(Device::cpu());
          consider_mistake(result.mistakes, capacity, confidence, label, best, images_on_cpu, i);
        }
      }
    }
    seen += batch->size();
    if (on_batch) on_batch(++batches);
  }
  model.train();
  if (comm.world_size() > 1) {  // every count is below 2^53: exact in f64
    std::vector<double> sums = {loss_sum, static_cast<double>(seen), static_cast<double>(top1), static_cast<double>(top5),
                                static_cast<double>(corrupt)};
    for (const std::vector<int64_t>* counts : {&result.confusion, &result.class_images, &result.class_hits})
      sums.insert(sums.end(), counts->begin(), counts->end());
    sums = distributed::all_reduce_values(comm, sums, distributed::ReduceOp::sum);
    loss_sum = sums[0];
    seen = static_cast<int64_t>(sums[1]);
    top1 = static_cast<int64_t>(sums[2]);
    top5 = static_cast<int64_t>(sums[3]);
    corrupt = static_cast<int64_t>(sums[4]);
    size_t at = 5;
    for (std::vector<int64_t>* counts : {&result.confusion, &result.class_images, &result.class_hits})
      for (int64_t& count : *counts) count = static_cast<int64_t>(sums[at++]);
  }
  result.images = seen;
  result.corrupt = corrupt;
  if (seen) {
    result.loss = loss_sum / static_cast<double>(seen);
    result.top1 = 100.0 * static_cast<double>(top1) / static_cast<double>(seen);
    // With 5 classes or fewer every image is in the top 5: not a measurement (NaN: left out).
    result.top5 = classes > 5 ? 100.0 * static_cast<double>(top5) / static_cast<double>(seen) : std::nan("");
  }
  return result;
}

uint64_t validation_record_bytes(int64_t classes) {
  const auto n = static_cast<uint64_t>(std::max<int64_t>(classes, 0));
  const uint64_t matrix = classes <= kConfusionMatrixMaxClasses ? n * n : 0;
  return (matrix + 2 * n) * sizeof(int64_t) * 2;  // the counts, and their f64 copy for the all-reduce
}

void write_confusion(const std::filesystem::path& path, const Validation& validation, const std::vector<std::string>& names,
                     int64_t epoch) {
  const int64_t classes = static_cast<int64_t>(names.size());
  nlohmann::json per_class = nlohmann::json::object();
  for (size_t truth = 0; truth < names.size(); ++truth) {
    const int64_t images = validation.class_images[truth];
    per_class[names[truth]] = images ? 100.0 * static_cast<double>(validation.class_hits[truth]) / static_cast<double>(images) : 0.0;
  }
  nlohmann::json doc = {{"epoch", epoch},
                        {"loss", validation.loss},
                        {"top1", validation.top1},
                        {"top5", validation.top5},
                        {"classes", names},
                        {"per_class_top1", per_class}};
  if (validation.confusion.empty()) {
    doc["confusion_matrix_left_out"] = std::to_string(classes) + " classes, more than the " +
                                       std::to_string(kConfusionMatrixMaxClasses) + " a confusion matrix is kept for";
  } else {
    nlohmann::json matrix = nlohmann::json::array();
    for (int64_t truth = 0; truth < classes; ++truth) {
      const auto row = validation.confusion.begin() + truth * classes;
      matrix.push_back(std::vector<int64_t>(row, row + classes));
    }
    doc["confusion_matrix_rows_truth_columns_predicted"] = matrix;
  }
  io::write_text_atomically(path, json_text(doc, 1) + "\n");  // never a half-written file, even on a full disk
}

}  // namespace cnn::train
