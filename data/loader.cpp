// The loader's threads: workers take the next batch number of the current epoch (at most
// `prefetch` ahead of the consumer), assemble it into pooled buffers and file the result under its
// number; next() hands results out in order. An epoch generation counter lets start_epoch abandon
// batches in flight, and the stop flag ends the workers between samples.
#include "data/loader.h"

#include <chrono>
#include <cstdio>

#include "data/worker_threads.h"
#include "engine/cuda_context.h"

namespace cnn::data {

namespace {
// Epochs that waited less than this in all are not reported as data-bound (start-up noise).
constexpr double kReportWaitSeconds = 0.05;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

std::string EpochStats::summary() const {
  char text[512];
  std::snprintf(text, sizeof text,
                "epoch %lld: %lld batches, %lld samples, %lld skipped; waited %.2f s for data, computed %.2f s "
                "(%.0f%% waiting)%s",
                static_cast<long long>(epoch), static_cast<long long>(batches), static_cast<long long>(samples),
                static_cast<long long>(skipped), wait_seconds, compute_seconds, 100.0 * wait_fraction(),
                data_bound() ? "; the data loader is the bottleneck: add workers, use a packed (cnn_pack) dataset, "
                               "or move augmentation to the GPU (dtype u8)"
                             : "");
  return text;
}

Loader::Loader(DatasetPtr dataset, Pipeline pipeline, LoaderOptions options)
    : dataset_(std::move(dataset)), pipeline_(std::move(pipeline)), options_(std::move(options)) {
  CNN_CHECK(dataset_ != nullptr, "Loader: no dataset");
  CNN_CHECK(dataset_->size() > 0, "Loader: the dataset is empty");
  CNN_CHECK(options_.workers >= 1, "Loader: workers must be at least 1, not ", options_.workers);
  CNN_CHECK(options_.batch_size >= 1, "Loader: batch_size must be at least 1, not ", options_.batch_size);
  CNN_CHECK(options_.dtype == DType::f32 || options_.dtype == DType::f16 || options_.dtype == DType::bf16 ||
                options_.dtype == DType::u8,
            "Loader: batch dtype ", dtype_name(options_.dtype), " is not supported; use f32, f16, bf16 or u8");
  CNN_CHECK(options_.dtype != DType::u8 || pipeline_.random_erasing().probability == 0,
            "Loader: random erasing zeroes boxes of the normalised batch, so it needs batch dtype f32, f16 or bf16, not u8");
  if (options_.prefetch <= 0) options_.prefetch = 2 * options_.workers;
  if (options_.device.is_cuda()) cuda::require_device(options_.device.index);
  pinned_ = options_.pinned.value_or(cuda::is_available());
  pool_capacity_ = static_cast<size_t>(options_.prefetch + options_.workers + 2);
  CNN_CHECK(options_.max_image_pixels >= 0, "Loader: max_image_pixels must be 0 (no limit) or positive, not ",
            options_.max_image_pixels);
  decode_ = pipeline_.decode_options();
  decode_.max_pixels = options_.max_image_pixels;
  EpochPlan(dataset_->size(), 0, sampler_options());  // validates rank, world size, batch size now
  threads_ = start_threads(options_.workers, [this](int w) { work(w); }, [this] { stop_workers(); }, "data loader workers",
                           "[data] workers");
}

void Loader::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
}

Loader::~Loader() {
  stop_workers();
  for (auto& t : threads_) t.join();
}

void Loader::log(const std::string& message) const { log_to(options_.log, message); }

int64_t Loader::steps_per_epoch() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (plan_ && plan_->skipped() == 0) return plan_->num_batches();
  return EpochPlan(dataset_->size(), 0, sampler_options()).num_batches();
}

int64_t Loader::batches_this_epoch() const {
  std::lock_guard<std::mutex> lock(mutex_);
  CNN_CHECK(plan_ != nullptr, "Loader::batches_this_epoch: call start_epoch first");
  return plan_->num_batches();
}

void Loader::start_epoch(int64_t epoch, int64_t start_step, int64_t skip_samples) {
  auto plan = std::make_shared<const EpochPlan>(dataset_->size(), epoch, sampler_options(), skip_samples);
  CNN_CHECK(start_step >= 0 && start_step <= plan->num_batches(), "Loader: cannot resume epoch ", epoch, " at step ",
            start_step, "; it has ", plan->num_batches(), " steps");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    plan_ = std::move(plan);
    ++generation_;
    next_to_issue_ = next_to_deliver_ = start_step;
    done_.clear();
    stats_ = EpochStats{};
    stats_.epoch = epoch;
    last_return_.reset();
    epoch_reported_ = false;
  }
  work_cv_.notify_all();
}

std::optional<Batch> Loader::next() {
  const double called = now_seconds();
  std::unique_lock<std::mutex> lock(mutex_);
  CNN_CHECK(plan_ != nullptr, "Loader::next: call start_epoch first");
  if (last_return_) stats_.compute_seconds += called - *last_return_;
  last_return_.reset();
  const int64_t step = next_to_deliver_;
  wait_stopped_ = false;
  if (step >= plan_->num_batches()) {
    if (!epoch_reported_ && stats_.data_bound() && stats_.wait_seconds >= kReportWaitSeconds) log(stats_.summary());
    epoch_reported_ = true;
    return std::nullopt;
  }
  const auto ready = [&] { return done_.count(step) > 0; };
  if (!options_.stop_waiting) {
    ready_cv_.wait(lock, ready);
  } else {
    const auto poll = std::chrono::duration<double>(kStopPollSeconds);
    while (!ready_cv_.wait_for(lock, poll, ready)) {
      if (!options_.stop_waiting()) continue;
      // The batch stays on its way: a later next() of this epoch would still deliver it.
      wait_stopped_ = true;
      stats_.wait_seconds += now_seconds() - called;
      return std::nullopt;
    }
  }
  Result result = std::move(done_[step]);
  done_.erase(step);
  ++next_to_deliver_;
  const double returned = now_seconds();
  stats_.wait_seconds += returned - called;
  lock.unlock();
  work_cv_.notify_all();
  if (result.error) std::rethrow_exception(result.error);
  lock.lock();
  stats_.batches += 1;
  stats_.samples += result.batch.size();
  stats_.skipped += result.batch.skipped;
  result.batch.upload.make_compute_wait();  // the consumer's kernels start after the copy, the host goes on
  last_return_ = now_seconds();
  return std::move(result.batch);
}

EpochStats Loader::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::vector<std::string> Loader::corrupt_files() const {
  std::lock_guard<std::mutex> lock(corrupt_mutex_);
  return corrupt_sources_;
}

void Loader::work(int worker) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [&] {
      return stop_ || (plan_ && next_to_issue_ < plan_->num_batches() &&
                       next_to_issue_ - next_to_deliver_ < options_.prefetch);
    });
    if (stop_) return;
    const int64_t step = next_to_issue_++;
    const uint64_t generation = generation_;
    const std::shared_ptr<const EpochPlan> plan = plan_;
    lock.unlock();
    const double started = now_seconds();
    Result result;
    try {
      result = assemble(*plan, step, generation);
    } catch (const std::exception& e) {
      result.error = std::make_exception_ptr(Error("data loader worker " + std::to_string(worker) + ", epoch " +
                                                   std::to_string(plan->epoch()) + ", step " + std::to_string(step) +
                                                   ": " + e.what()));
    } catch (...) {
      result.error = std::current_exception();
    }
    const double busy = now_seconds() - started;
    lock.lock();
    if (generation == generation_ && !stop_) {
      done_[step] = std::move(result);
      stats_.worker_seconds += busy;
      ready_cv_.notify_all();
    }
  }
}

Loader::Buffers Loader::acquire_buffers() {
  const int64_t b = options_.batch_size;
  const Shape image_shape{b, pipeline_.height(), pipeline_.width(), pipeline_.channels()};
  {
    // A free slot (nothing but the pool refers to its storage; batches handed out are views of it)
    // whose last upload has finished; else any free slot, whose upload is then waited for outside
    // the lock (handing out the views claims the slot).
    std::unique_lock<std::mutex> lock(pool_mutex_);
    Buffers* chosen = nullptr;
    for (Buffers& buffers : pool_) {
      if (buffers.images.impl()->storage.use_count() != 1 || buffers.labels.impl()->storage.use_count() != 1) continue;
      std::atomic_thread_fence(std::memory_order_acquire);  // after the last view's release: its writes are visible
      const bool finished = !*buffers.last_upload || (*buffers.last_upload)->done();
      if (chosen == nullptr || finished) chosen = &buffers;
      if (finished) break;
    }
    if (chosen != nullptr) {
      Buffers taken{chosen->images.slice(0, b), chosen->labels.slice(0, b), chosen->last_upload};
      const std::shared_ptr<cuda::Event> pending = *taken.last_upload;
      taken.last_upload->reset();
      lock.unlock();
      if (pending) pending->synchronize();  // the copy that last read this slot
      return taken;
    }
  }
  Buffers fresh{Tensor::empty(image_shape, options_.dtype, Device::cpu(), pinned_),
                Tensor::empty({b}, DType::i64, Device::cpu(), pinned_), std::make_shared<std::shared_ptr<cuda::Event>>()};
  std::lock_guard<std::mutex> lock(pool_mutex_);
  if (pool_.size() < pool_capacity_) pool_.push_back(fresh);
  return {fresh.images.slice(0, b), fresh.labels.slice(0, b), fresh.last_upload};
}

// Decodes sample `index` of `epoch` and runs the transforms on it, into `image` and the random
// erasing box `erase`; false when it is corrupt and skipped. A transform can also find a sample
// unusable (Resize of a long thin strip): that is skipped and counted the same way.
bool Loader::load_sample(int64_t index, int64_t epoch, Image& image, std::optional<Box>& erase) {
  {
    std::lock_guard<std::mutex> lock(corrupt_mutex_);
    if (corrupt_indices_.count(index)) return false;
  }
  try {
    image = pipeline_.run(dataset_->load(index, decode_), options_.seed, static_cast<uint64_t>(epoch),
                          static_cast<uint64_t>(index), dataset_->source(index), erase);
    return true;
  } catch (const CorruptImageError& e) {
    if (options_.fail_on_corrupt)
      throw Error(std::string(e.what()) + "; the loader stops because fail_on_corrupt is set (unset it to skip "
                                          "unreadable samples, or remove the file)");
    std::lock_guard<std::mutex> lock(corrupt_mutex_);
    if (corrupt_indices_.insert(index).second) {
      corrupt_sources_.push_back(dataset_->source(index));
      log("skipping unreadable sample " + std::to_string(index) + ": " + e.what());
    }
    return false;
  }
}

Loader::Result Loader::assemble(const EpochPlan& plan, int64_t step, uint64_t generation) {
  const int64_t begin = plan.batch_begin(step), count = plan.batch_count(step);
  Buffers buffers = acquire_buffers();
  Result result;
  Batch& batch = result.batch;
  batch.epoch = plan.epoch();
  batch.step = step;
  const size_t slot_bytes = static_cast<size_t>(pipeline_.height()) * pipeline_.width() * pipeline_.channels() *
                            dtype_size(options_.dtype);
  auto* images = static_cast<uint8_t*>(buffers.images.data());
  int64_t* labels = buffers.labels.data_as<int64_t>();
  Image image;
  std::optional<Box> erase;
  for (int64_t j = 0; j < count; ++j) {
    if (stop_ || generation != generation_) return result;  // abandoned: nobody will take it
    const int64_t index = plan.indices()[static_cast<size_t>(begin + j)];
    try {
      if (!load_sample(index, plan.epoch(), image, erase)) {
        ++batch.skipped;
        continue;
      }
    } catch (const std::exception& e) {
      throw Error("sample " + std::to_string(index) + " (" + dataset_->source(index) + "): " + e.what());
    }
    const auto filled = static_cast<int64_t>(batch.indices.size());
    pipeline_.write(image, erase, options_.dtype, images + static_cast<size_t>(filled) * slot_bytes);
    labels[filled] = dataset_->label(index);
    batch.indices.push_back(index);
  }
  const auto filled = static_cast<int64_t>(batch.indices.size());
  batch.images = buffers.images.slice(0, filled);
  batch.labels = buffers.labels.slice(0, filled);
  if (options_.device.is_cuda()) {
    batch.upload = upload_async({batch.images, batch.labels}, options_.device);
    *buffers.last_upload = batch.upload.completion();
    batch.images = batch.upload.tensors[0];
    batch.labels = batch.upload.tensors[1];
  }
  return result;
}

}  // namespace cnn::data
