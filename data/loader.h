// The data loader: a pool of persistent worker threads that decode, augment and assemble whole
// batches straight into (pinned, when CUDA is present) host buffers, a bounded window of batches in
// flight, delivery in order, and accounting of how long the consumer waited for data.
//
//   LoaderOptions options;
//   options.batch_size = 256, options.workers = 8, options.seed = 1;
//   Loader loader(dataset, Pipeline::train(224), options);
//   for (int64_t epoch = 0; epoch < epochs; ++epoch) {
//     loader.start_epoch(epoch);                 // or start_epoch(epoch, step) to resume
//     while (auto batch = loader.next()) train_step(batch->images, batch->labels);
//     std::puts(loader.stats().summary().c_str());
//   }
//
// Batches are the same bits whatever the number of workers: each batch is assembled by one worker
// from the epoch plan (sampler.h) and every sample's augmentation is keyed by (seed, epoch, index).
// Corrupt files (CorruptImageError) are left out of their batch, which then holds fewer samples,
// with one warning per file; later epochs skip them silently. fail_on_corrupt makes the first one
// an error. Any error in a worker reaches the caller of next() for that batch, with its context.
// Destroying the loader at any time stops and joins the workers. One thread consumes batches.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "data/dataset.h"
#include "data/sampler.h"
#include "data/transforms.h"
#include "engine/async_copy.h"
#include "engine/device.h"
#include "engine/tensor.h"

namespace cnn::data {

// The sampling fields (batch_size, shuffle, seed, rank, world_size, drop_last, pad_shards) are
// SamplerOptions'; see sampler.h.
struct LoaderOptions : SamplerOptions {
  LoaderOptions() { batch_size = 128; }
  int workers = 4;
  int prefetch = 0;  // batches assembled ahead of the consumer; 0: two per worker
  DType dtype = DType::f32;  // f32, f16, bf16 (normalised) or u8 (raw pixels, for GPU augmentation)
  bool fail_on_corrupt = false;
  // Images whose header claims more pixels than this are corrupt (skipped and counted) before they
  // are decoded: DecodeOptions::max_pixels. 0: no limit.
  int64_t max_image_pixels = kDefaultMaxImagePixels;
  std::optional<bool> pinned;  // page-locked batch buffers; default: when a CUDA device is usable
  // A CUDA device here makes the workers upload each finished batch to it on the device's copy
  // stream (engine/async_copy.h): the copies of the next batches overlap the consumer's compute, and
  // next() makes the compute stream wait for its batch's copy without blocking the host.
  Device device = Device::cpu();
  // Where warnings and reports go; default: standard error, prefixed "cnn data: ".
  std::function<void(const std::string&)> log;
  // Asked about every kStopPollSeconds while next() waits for a batch: when it says true (Ctrl-C
  // while a worker is stuck on a slow or hung file system), next() gives up waiting, returns nothing
  // and wait_stopped() says why. None: next() waits for as long as the batch takes.
  std::function<bool()> stop_waiting;
};

struct Batch {
  Tensor images;  // [n, H, W, C] of LoaderOptions::dtype
  Tensor labels;  // [n] i64
  int64_t epoch = 0, step = 0;
  std::vector<int64_t> indices;  // dataset index of each sample
  int64_t skipped = 0;            // corrupt samples left out of this batch
  // The upload to LoaderOptions::device, when there is one: it holds the pinned host buffers the
  // copy reads from for as long as the batch lives.
  Upload upload;
  int64_t size() const { return images.defined() ? images.size(0) : 0; }
};

// Per epoch, from the consumer's side: time blocked in next() (waiting for data) and time between
// next() calls (computing). The loader cannot keep up when waiting is a large part of the total.
struct EpochStats {
  int64_t epoch = -1;
  int64_t batches = 0, samples = 0, skipped = 0;
  double wait_seconds = 0, compute_seconds = 0;
  double worker_seconds = 0;  // time the workers spent assembling this epoch's batches, summed
  double wait_fraction() const {
    const double total = wait_seconds + compute_seconds;
    return total > 0 ? wait_seconds / total : 0.0;
  }
  bool data_bound() const { return wait_fraction() > 0.1; }
  std::string summary() const;
};

class Loader {
 public:
  Loader(DatasetPtr dataset, Pipeline pipeline, LoaderOptions options);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Starts (or restarts) an epoch at batch `start_step`; batches in flight for a previous epoch
  // are abandoned. `skip_samples`: samples of the epoch already used by all ranks together, for a
  // run resumed on another number of ranks (EpochPlan); the batches are then those of the rest.
  void start_epoch(int64_t epoch, int64_t start_step = 0, int64_t skip_samples = 0);
  // The next batch of the epoch in order, or nothing at its end (or when stop_waiting ended the
  // wait: see wait_stopped()). Rethrows a worker's error.
  std::optional<Batch> next();
  // Whether the last next() returned nothing because stop_waiting asked it to, not at the epoch's end.
  bool wait_stopped() const { return wait_stopped_; }
  static constexpr double kStopPollSeconds = 0.2;

  int64_t steps_per_epoch() const;  // of a whole epoch (no samples skipped)
  int64_t batches_this_epoch() const;  // of the epoch started last (fewer when samples were skipped)
  EpochStats stats() const;  // of the current (or last) epoch
  // Sources of the corrupt samples found so far, in the order found.
  std::vector<std::string> corrupt_files() const;
  const Dataset& dataset() const { return *dataset_; }
  const Pipeline& pipeline() const { return pipeline_; }
  const LoaderOptions& options() const { return options_; }

 private:
  struct Result {
    Batch batch;
    std::exception_ptr error;
  };
  // A pool slot's pinned host tensors, and the completion event of the last upload that read them
  // (shared by the slot and the views handed out): a slot is reused only after that copy finished.
  struct Buffers {
    Tensor images, labels;
    std::shared_ptr<std::shared_ptr<cuda::Event>> last_upload;
  };
  void work(int worker);
  void stop_workers();  // makes every worker return between samples
  Result assemble(const EpochPlan& plan, int64_t step, uint64_t generation);
  bool load_sample(int64_t index, int64_t epoch, Image& image, std::optional<Box>& erase);
  Buffers acquire_buffers();
  const SamplerOptions& sampler_options() const { return options_; }
  void log(const std::string& message) const;

  DatasetPtr dataset_;
  Pipeline pipeline_;
  LoaderOptions options_;
  DecodeOptions decode_;
  bool pinned_ = false;
  size_t pool_capacity_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable work_cv_, ready_cv_;
  std::shared_ptr<const EpochPlan> plan_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  int64_t next_to_issue_ = 0, next_to_deliver_ = 0;
  std::map<int64_t, Result> done_;
  EpochStats stats_;
  std::optional<double> last_return_;  // when next() last returned a batch (seconds, steady clock)
  bool epoch_reported_ = false;
  bool wait_stopped_ = false;

  mutable std::mutex corrupt_mutex_;
  std::set<int64_t> corrupt_indices_;
  std::vector<std::string> corrupt_sources_;

  std::mutex pool_mutex_;
  std::vector<Buffers> pool_;

  std::vector<std::thread> threads_;
};

}  // namespace cnn::data
