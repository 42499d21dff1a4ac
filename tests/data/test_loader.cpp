// The threaded loader: bitwise-identical epochs whatever the number of workers, mid-epoch resume,
// shard coverage, corrupt files skipped with one warning each (or fatal with fail_on_corrupt),
// errors surfacing with their context, clean shutdown, and the wait/compute accounting.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "data/array_dataset.h"
#include "data/encode.h"
#include "data/file_dataset.h"
#include "data/loader.h"
#include "fixtures.h"

using namespace cnn;
using namespace cnn::data;
using namespace cnn::data::test;

namespace {
// Images of assorted sizes, with labels i % 3; optionally slow, or failing at one index.
class SyntheticDataset : public Dataset {
 public:
  SyntheticDataset(int64_t n, int fail_at = -1, double seconds_per_sample = 0)
      : n_(n), fail_at_(fail_at), delay_(seconds_per_sample) {
    class_names_ = {"a", "b", "c"};
  }
  int64_t size() const override { return n_; }
  int64_t label(int64_t i) const override { return i % 3; }
  Image load(int64_t i, const DecodeOptions& options) const override {
    if (delay_ > 0) std::this_thread::sleep_for(std::chrono::duration<double>(delay_));
    CNN_CHECK(i != fail_at_, "synthetic failure at ", i);
    return smooth_image(20 + static_cast<int>(i % 7) * 3, 24 + static_cast<int>(i % 5) * 4, options.channels,
                        static_cast<int>(i));
  }
  std::string source(int64_t i) const override { return "synthetic[" + std::to_string(i) + "]"; }

 private:
  int64_t n_;
  int fail_at_;
  double delay_;
};

Pipeline augmenting_pipeline() {
  return Pipeline({std::make_shared<RandomResizedCrop>(16, 16), std::make_shared<RandomHorizontalFlip>(),
                   std::make_shared<ColorJitter>(0.4f, 0.4f, 0.4f, 0.1f)},
                  16, 16, 3, Normalize::imagenet());
}

struct EpochRecord {
  std::vector<std::vector<uint8_t>> images;
  std::vector<std::vector<int64_t>> labels, indices;
};

EpochRecord run_epoch(Loader& loader, int64_t epoch, int64_t start_step = 0) {
  EpochRecord r;
  loader.start_epoch(epoch, start_step);
  while (auto b = loader.next()) {
    const auto* bytes = static_cast<const uint8_t*>(b->images.data());
    r.images.emplace_back(bytes, bytes + b->images.nbytes());
    const int64_t* y = b->labels.data_as<int64_t>();
    r.labels.emplace_back(y, y + b->labels.numel());
    r.indices.push_back(b->indices);
  }
  return r;
}

LoaderOptions options_with(int workers, int64_t batch = 5) {
  LoaderOptions o;
  o.batch_size = batch;
  o.workers = workers;
  o.seed = 1234;
  return o;
}
}  // namespace

TEST_CASE("a shuffled, augmented epoch is bitwise identical on 1, 2 and 4 workers") {
  auto ds = std::make_shared<SyntheticDataset>(23);
  std::vector<EpochRecord> runs;
  for (int workers : {1, 2, 4}) {
    Loader loader(ds, augmenting_pipeline(), options_with(workers));
    CHECK(loader.steps_per_epoch() == 5);
    runs.push_back(run_epoch(loader, 2));
  }
  REQUIRE(runs[0].images.size() == 5);
  CHECK(runs[0].images.back().size() == 3 * 16 * 16 * 3 * sizeof(float));  // 23 = 4 * 5 + 3
  for (size_t r = 1; r < runs.size(); ++r) {
    CHECK(runs[r].images == runs[0].images);
    CHECK(runs[r].labels == runs[0].labels);
    CHECK(runs[r].indices == runs[0].indices);
  }
  std::set<int64_t> seen;
  for (const auto& batch : runs[0].indices)
    for (size_t j = 0; j < batch.size(); ++j) {
      seen.insert(batch[j]);
      CHECK(runs[0].labels[&batch - runs[0].indices.data()][j] == batch[j] % 3);
    }
  CHECK(seen.size() == 23);
  // Another epoch is another permutation and other crops.
  Loader loader(ds, augmenting_pipeline(), options_with(3));
  const EpochRecord next = run_epoch(loader, 3);
  CHECK(next.indices != runs[0].indices);
}

TEST_CASE("resuming mid-epoch yields exactly the rest of the uninterrupted epoch") {
  auto ds = std::make_shared<SyntheticDataset>(30);
  Loader full(ds, augmenting_pipeline(), options_with(2, 4));
  const EpochRecord whole = run_epoch(full, 5);
  Loader resumed(ds, augmenting_pipeline(), options_with(3, 4));
  const EpochRecord rest = run_epoch(resumed, 5, 3);
  REQUIRE(rest.images.size() == whole.images.size() - 3);
  for (size_t k = 0; k < rest.images.size(); ++k) {
    CHECK(rest.images[k] == whole.images[k + 3]);
    CHECK(rest.indices[k] == whole.indices[k + 3]);
  }
  CHECK(error_message([&] { resumed.start_epoch(5, 99); }).find("cannot resume epoch 5 at step 99") !=
        std::string::npos);
}

TEST_CASE("shards: every sample exactly once across ranks per epoch, drop_last and padding") {
  const int64_t n = 10;
  for (int64_t epoch : {0, 1}) {
    std::map<int64_t, int> count;
    std::vector<std::vector<int64_t>> orders;
    for (int rank = 0; rank < 3; ++rank) {
      SamplerOptions o;
      o.batch_size = 2;
      o.seed = 9;
      o.rank = rank;
      o.world_size = 3;
      const EpochPlan plan(n, epoch, o);
      for (int64_t i : plan.indices()) ++count[i];
      orders.push_back(plan.indices());
      CHECK(plan.num_samples() == static_cast<int64_t>(plan.indices().size()));
    }
    CHECK(count.size() == 10);
    for (const auto& [index, times] : count) CHECK(times == 1);
    CHECK(orders[0].size() == 4);
    CHECK(orders[2].size() == 3);
  }
  SamplerOptions o;
  o.batch_size = 2, o.world_size = 3, o.seed = 9;
  CHECK(EpochPlan(n, 0, o).indices() != EpochPlan(n, 1, o).indices());  // reshuffled per epoch
  o.drop_last = true;
  for (int rank = 0; rank < 3; ++rank) {
    o.rank = rank;
    const EpochPlan plan(n, 0, o);
    CHECK(plan.indices().size() == 3);
    CHECK(plan.num_batches() == 1);  // the incomplete second batch is dropped too
  }
  o.drop_last = false;
  o.pad_shards = true;
  std::multiset<int64_t> all;
  for (int rank = 0; rank < 3; ++rank) {
    o.rank = rank;
    const EpochPlan plan(n, 0, o);
    CHECK(plan.indices().size() == 4);
    all.insert(plan.indices().begin(), plan.indices().end());
  }
  CHECK(all.size() == 12);
  o.shuffle = false;
  o.pad_shards = false;
  o.rank = 1;
  CHECK(EpochPlan(n, 0, o).indices() == std::vector<int64_t>{1, 4, 7});
  o.rank = 3;
  CHECK(error_message([&] { EpochPlan(n, 0, o); }).find("rank 3 of world size 3") != std::string::npos);
}

TEST_CASE("shards after skipping: the same batches on as many ranks, the unused rest split anew on another number") {
  const int64_t n = 103;
  SamplerOptions o;
  o.batch_size = 4, o.seed = 5, o.world_size = 2, o.pad_shards = true;
  // 2 ranks that used 3 batches each skip 3 * 4 * 2 = 24 samples: batches 3.. of the full plan.
  for (int rank = 0; rank < 2; ++rank) {
    o.rank = rank;
    const EpochPlan full(n, 4, o), rest(n, 4, o, 24);
    CHECK(rest.num_batches() == full.num_batches() - 3);
    CHECK(std::vector<int64_t>(full.indices().begin() + 12, full.indices().end()) == rest.indices());
  }
  // Resumed on 3 ranks: the shards are disjoint and together are exactly the samples not used yet.
  const std::vector<int64_t> order = epoch_permutation(n, 5, 4);
  std::vector<int64_t> padded = order;
  padded.push_back(order[0]);  // 2 ranks padded 103 to 104
  std::multiset<int64_t> unused(padded.begin() + 24, padded.end()), seen;
  SamplerOptions three = o;
  three.world_size = 3, three.pad_shards = false;
  for (int rank = 0; rank < 3; ++rank) {
    three.rank = rank;
    const EpochPlan plan(n, 4, three, 24);
    seen.insert(plan.indices().begin(), plan.indices().end());
  }
  CHECK(std::multiset<int64_t>(order.begin() + 24, order.end()) == seen);  // without padding on 3 ranks: 79 samples
  CHECK(unused.size() == seen.size() + 1);
  // Skipping everything leaves an empty epoch; a negative skip is refused.
  CHECK(EpochPlan(n, 4, three, 1000).num_batches() == 0);
  CHECK(error_message([&] { EpochPlan(n, 4, three, -1); }).find("must not be negative") != std::string::npos);
}

TEST_CASE("the loader's shards cover the dataset exactly once across ranks") {
  auto ds = std::make_shared<SyntheticDataset>(17);
  std::multiset<int64_t> seen;
  for (int rank = 0; rank < 4; ++rank) {
    LoaderOptions o = options_with(2, 3);
    o.rank = rank;
    o.world_size = 4;
    Loader loader(ds, Pipeline::eval(20, 16), o);
    for (const auto& b : run_epoch(loader, 1).indices) seen.insert(b.begin(), b.end());
  }
  CHECK(seen.size() == 17);
  for (int64_t i = 0; i < 17; ++i) CHECK(seen.count(i) == 1);
}

TEST_CASE("corrupt files are skipped with one warning each, counted, and fatal with fail_on_corrupt") {
  TempDir dir;
  for (int i = 0; i < 6; ++i)
    dir.write("cls/good" + std::to_string(i) + ".jpg", encode_image(smooth_image(24, 24, 3, i), ImageFormat::jpeg));
  const auto jpeg = encode_image(smooth_image(128, 128, 3), ImageFormat::jpeg);
  const auto png = encode_image(pattern_image(32, 32, 3), ImageFormat::png);
  dir.write("cls/empty.jpg", {});
  dir.write("cls/truncated.jpg", std::vector<uint8_t>(jpeg.begin(), jpeg.begin() + jpeg.size() * 3 / 4));
  dir.write("cls/truncated.png", std::vector<uint8_t>(png.begin(), png.begin() + png.size() / 2));
  dir.write_text("cls/text.png", "this is not a picture");
  auto ds = open_image_folder(dir.path().string());
  REQUIRE(ds->size() == 10);

  std::mutex log_mutex;
  std::vector<std::string> warnings;
  LoaderOptions o = options_with(3, 4);
  o.log = [&](const std::string& m) {
    std::lock_guard<std::mutex> lock(log_mutex);
    if (m.find("skipping") != std::string::npos) warnings.push_back(m);
  };
  Loader loader(ds, Pipeline::eval(24, 16), o);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    int64_t samples = 0, skipped = 0;
    loader.start_epoch(epoch);
    while (auto b = loader.next()) {
      samples += b->size();
      skipped += b->skipped;
      CHECK(b->labels.numel() == b->size());
      CHECK(b->indices.size() == static_cast<size_t>(b->size()));
    }
    CHECK(samples == 6);
    CHECK(skipped == 4);
    CHECK(loader.stats().skipped == 4);
  }
  CHECK(warnings.size() == 4);  // one per file, none in the second epoch
  CHECK(loader.corrupt_files().size() == 4);
  for (const char* name : {"empty.jpg", "truncated.jpg", "truncated.png", "text.png"}) {
    bool named = false;
    for (const auto& w : warnings) named |= w.find(name) != std::string::npos;
    CHECK_MESSAGE(named, name);
  }

  o.fail_on_corrupt = true;
  o.shuffle = false;
  Loader strict(ds, Pipeline::eval(24, 16), o);
  strict.start_epoch(0);
  const std::string err = error_message([&] {
    while (strict.next()) {
    }
  });
  CHECK(err.find("empty.jpg: empty file") != std::string::npos);
  CHECK(err.find("fail_on_corrupt") != std::string::npos);
}

TEST_CASE("images over the loader's pixel limit are skipped as corrupt, before decoding") {
  TempDir dir;
  dir.write("cls/small.png", encode_image(smooth_image(16, 16, 3, 1), ImageFormat::png));
  dir.write("cls/large.png", encode_image(smooth_image(40, 30, 3, 2), ImageFormat::png));
  auto ds = open_image_folder(dir.path().string());
  std::vector<std::string> warnings;
  LoaderOptions o = options_with(1, 2);
  o.max_image_pixels = 16 * 16;
  o.log = [&](const std::string& m) { warnings.push_back(m); };
  Loader loader(ds, Pipeline::eval(16, 16), o);
  loader.start_epoch(0);
  int64_t samples = 0;
  while (auto b = loader.next()) samples += b->size();
  CHECK(samples == 1);
  CHECK(loader.stats().skipped == 1);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("large.png: the header claims 30 x 40 pixels (1200), more than the limit of 256") != std::string::npos);
  o.max_image_pixels = -5;
  CHECK(error_message([&] { Loader(ds, Pipeline::eval(16, 16), o); }).find("max_image_pixels must be 0") != std::string::npos);
}

TEST_CASE("an image that a transform cannot use (Resize of a long thin strip) is skipped and counted like a corrupt one") {
  // Before: the transforms ran outside the corrupt-image handling, and the error stopped the epoch.
  TempDir dir;
  dir.write("cls/ordinary.png", encode_image(smooth_image(20, 24, 1, 1), ImageFormat::png));
  dir.write("cls/strip.png", encode_image(Image(1, 1500000, 1), ImageFormat::png));  // 64 x 96,000,000 once resized
  auto ds = open_image_folder(dir.path().string());
  std::vector<std::string> warnings;
  LoaderOptions o = options_with(1, 2);
  o.log = [&](const std::string& m) { warnings.push_back(m); };
  const Pipeline pipeline({std::make_shared<Resize>(64), std::make_shared<CenterCrop>(16, 16)}, 16, 16, 1, Normalize::identity(1));
  Loader loader(ds, pipeline, o);
  for (int epoch = 0; epoch < 2; ++epoch) {
    loader.start_epoch(epoch);
    int64_t samples = 0;
    while (auto b = loader.next()) samples += b->size();
    CHECK(samples == 1);
    CHECK(loader.stats().skipped == 1);
  }
  REQUIRE(warnings.size() == 1);  // one warning per file, however many epochs
  CHECK(warnings[0].find("strip.png") != std::string::npos);
  CHECK(warnings[0].find("gives 64 x 96000000 pixels, more than the limit") != std::string::npos);
}

TEST_CASE("an error in a worker surfaces in next() with its context, and shutdown is clean") {
  auto ds = std::make_shared<SyntheticDataset>(40, /*fail_at=*/13);
  LoaderOptions o = options_with(4, 4);
  o.shuffle = false;
  {
    Loader loader(ds, Pipeline::eval(20, 16), o);
    loader.start_epoch(0);
    int delivered = 0;
    const std::string err = error_message([&] {
      while (loader.next()) ++delivered;
    });
    CHECK(delivered == 3);  // batches 0..2; batch 3 holds sample 13
    CHECK(err.find("epoch 0, step 3") != std::string::npos);
    CHECK(err.find("sample 13 (synthetic[13])") != std::string::npos);
    CHECK(err.find("synthetic failure at 13") != std::string::npos);
    CHECK(loader.next().has_value());  // the epoch goes on after the failed batch
  }  // destroyed with batches in flight
  {
    Loader early(std::make_shared<SyntheticDataset>(200, -1, 0.002), Pipeline::eval(20, 16), o);
    early.start_epoch(0);
    CHECK(early.next().has_value());
    early.start_epoch(1);  // abandon epoch 0 midway
    CHECK(early.next()->epoch == 1);
  }  // early exit: workers busy, consumer gone
  Loader never_started(ds, Pipeline::eval(20, 16), o);
  CHECK(error_message([&] { never_started.next(); }).find("call start_epoch first") != std::string::npos);
}

TEST_CASE("batches are recycled once the consumer lets go, and kept while it holds them") {
  auto ds = std::make_shared<SyntheticDataset>(60);
  Loader loader(ds, Pipeline::eval(20, 16), options_with(2, 3));
  loader.start_epoch(0);
  std::vector<Batch> held;
  while (auto b = loader.next()) held.push_back(*b);  // all 20 held at once: none may be overwritten
  Loader reference(ds, Pipeline::eval(20, 16), options_with(1, 3));
  const EpochRecord expected = run_epoch(reference, 0);
  REQUIRE(held.size() == expected.images.size());
  for (size_t k = 0; k < held.size(); ++k)
    CHECK(std::memcmp(held[k].images.data(), expected.images[k].data(), expected.images[k].size()) == 0);
}

TEST_CASE("time accounting: waiting for a slow loader vs computing") {
  auto slow = std::make_shared<SyntheticDataset>(12, -1, 0.01);
  LoaderOptions o = options_with(1, 4);
  std::vector<std::string> logged;
  o.log = [&](const std::string& m) { logged.push_back(m); };
  Loader loader(slow, Pipeline::eval(20, 16), o);
  loader.start_epoch(0);
  while (loader.next()) {
  }
  const EpochStats waiting = loader.stats();
  CHECK(waiting.batches == 3);
  CHECK(waiting.samples == 12);
  CHECK(waiting.wait_seconds > 0.08);  // 12 samples at 10 ms on one worker
  CHECK(waiting.data_bound());
  CHECK(waiting.worker_seconds > 0.1);
  REQUIRE(logged.size() == 1);
  CHECK(logged[0].find("the data loader is the bottleneck") != std::string::npos);

  Loader fast(std::make_shared<SyntheticDataset>(12), Pipeline::eval(20, 16), options_with(2, 4));
  fast.start_epoch(0);
  while (fast.next()) std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const EpochStats computing = fast.stats();
  CHECK(computing.compute_seconds > 0.08);
  CHECK(computing.compute_seconds > computing.wait_seconds);
  CHECK(computing.summary().find("epoch 0: 3 batches, 12 samples, 0 skipped") == 0);
}

TEST_CASE("a stop request ends a wait on a slow loader within a poll, and the batch still comes after") {
  // A worker stuck on a file (a hung file system): each sample takes 0.5 s, so a batch of 2 takes 1 s.
  auto ds = std::make_shared<SyntheticDataset>(8, -1, 0.5);
  LoaderOptions o = options_with(1, 2);
  o.shuffle = false;
  std::atomic<bool> stop{true};
  o.stop_waiting = [&] { return stop.load(); };
  Loader loader(ds, Pipeline::eval(16, 16), o);
  loader.start_epoch(0);
  const auto asked = std::chrono::steady_clock::now();
  CHECK_FALSE(loader.next().has_value());
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count();
  CHECK(loader.wait_stopped());
  CHECK(waited < 0.9);  // one poll (0.2 s), not the batch's second
  CHECK(waited >= Loader::kStopPollSeconds * 0.9);
  // Without the request the same epoch goes on from the batch that was on its way.
  stop = false;
  const std::optional<Batch> batch = loader.next();
  REQUIRE(batch.has_value());
  CHECK_FALSE(loader.wait_stopped());
  CHECK(batch->step == 0);
  CHECK(batch->indices == std::vector<int64_t>{0, 1});
}
