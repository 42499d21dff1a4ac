// The run's pictures (see run_pictures.h): grids and heat maps made from the trainer's tensors,
// encoded as PNG once and written to both the run folder and TensorBoard.
#include "train/pictures/run_pictures.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "data/batch_augment.h"
#include "data/encode.h"
#include "engine/io/atomic_file.h"
#include "train/log/tensorboard.h"
#include "train/pictures/image_grid.h"

namespace cnn::train {

namespace {
// Whole percent, rounded down: a mistake made with 99.7% confidence shows 99%, never 100%.
std::string percent_down(double fraction) { return std::to_string(static_cast<int>(std::floor(100.0 * fraction))) + "%"; }
std::string percent(double fraction) { return std::to_string(static_cast<int>(std::lround(100.0 * fraction))) + "%"; }
}  // namespace

std::string target_caption(const std::vector<double>& target_row, const std::vector<std::string>& class_names) {
  std::vector<size_t> order(target_row.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return target_row[a] > target_row[b]; });
  const auto name = [&](size_t k) { return k < class_names.size() ? class_names[k] : std::to_string(k); };
  if (order.empty()) return "";
  // A one-hot (or label-smoothed) target is just its class.
  if (order.size() < 2 || target_row[order[1]] < 0.1) return name(order[0]);
  return name(order[0]) + " " + percent(target_row[order[0]]) + "\n" + name(order[1]) + " " + percent(target_row[order[1]]);
}

RunPictures::RunPictures(const TrainSettings& settings, std::filesystem::path run_dir, EventWriter* events,
                         std::vector<std::string> class_names, bool enabled)
    : settings_(settings), run_dir_(std::move(run_dir)), events_(events), class_names_(std::move(class_names)), enabled_(enabled) {}

std::string RunPictures::class_name(int64_t k) const {
  return k >= 0 && static_cast<size_t>(k) < class_names_.size() ? class_names_[static_cast<size_t>(k)] : std::to_string(k);
}

void RunPictures::publish(const std::string& name, const data::Image& image, int64_t step) {
  const std::vector<uint8_t> png = data::encode_image(image, data::ImageFormat::png);
  io::write_text_atomically(run_dir_ / (name + ".png"), std::string(png.begin(), png.end()));
  if (events_) {
    events_->add_image("images/" + name, png, image.height, image.width, image.channels, step);
    events_->flush();
  }
}

void RunPictures::first_batch(const MicroBatch& batch, int64_t step) {
  if (!enabled_ || samples_done_) return;
  samples_done_ = true;
  const int64_t shown = std::min<int64_t>(kSamplesShown, batch.images.size(0));
  std::vector<std::vector<double>> targets;
  const int64_t classes = settings_.data.classes;
  Tensor images = batch.images;
  if (settings_.loss.mixing) {
    // The same draw as forward_backward's (a function of the seed, epoch and batch), on a copy.
    images = batch.images.clone();
    const std::vector<double> soft = data::mix_batch(images, batch.labels, classes, settings_.loss.mix, settings_.compute.seed,
                                        static_cast<uint64_t>(batch.epoch), static_cast<uint64_t>(batch.index))
                            .targets.to_doubles();
    for (int64_t i = 0; i < shown; ++i)
      targets.emplace_back(soft.begin() + i * classes, soft.begin() + (i + 1) * classes);
  } else {
    const std::vector<double> labels = batch.labels.to_doubles();
    for (int64_t i = 0; i < shown; ++i) {
      std::vector<double> one_hot(static_cast<size_t>(classes), 0.0);
      one_hot[static_cast<size_t>(labels[static_cast<size_t>(i)])] = 1.0;
      targets.push_back(std::move(one_hot));
    }
  }
  std::vector<data::Image> pictures = denormalize(images, settings_.data.normalize, shown);
  std::vector<Tile> tiles;
  for (int64_t i = 0; i < shown; ++i)
    tiles.push_back({std::move(pictures[static_cast<size_t>(i)]), target_caption(targets[static_cast<size_t>(i)], class_names_)});
  publish("samples", tile_grid(tiles, 8, settings_.loss.mixing ? 96 : 64), step);  // two classes per caption need wider tiles
}

void RunPictures::after_validation(const Validation& validation, int64_t step) {
  if (!enabled_) return;
  if (!validation.confusion.empty())  // left out above kConfusionMatrixMaxClasses
    publish("confusion", confusion_heatmap(validation.confusion, static_cast<int64_t>(class_names_.size())), step);
  if (validation.mistakes.empty()) return;
  std::vector<Tile> tiles;
  for (const Mistake& m : validation.mistakes) {
    data::Image image = std::move(denormalize(m.image, settings_.data.normalize, 1).front());
    tiles.push_back({std::move(image), "TRUE " + class_name(m.truth) + "\n" + class_name(m.predicted) + " " + percent_down(m.confidence),
                     {255, 140, 120, 255}});
  }
  publish("mistakes", tile_grid(tiles, 4, 96), step);  // wider tiles: two class names per caption
}

bool RunPictures::histograms_due(int64_t epoch) const {
  const int64_t every = settings_.log.histogram_every;
  return enabled_ && events_ && every > 0 && (epoch + 1) % every == 0;
}

void RunPictures::histograms(const Module& model, double loss_scale, int64_t step) {
  for (const NamedParameter& p : model.named_parameters()) {
    events_->add_histogram("weights/" + p.name, p.tensor.to_doubles(), step);
    const Tensor grad = p.tensor.grad();
    if (!grad.defined()) continue;
    std::vector<double> g = grad.to_doubles();
    for (double& x : g) x /= loss_scale;
    events_->add_histogram("gradients/" + p.name, g, step);
  }
  events_->flush();
}

}  // namespace cnn::train
