// Data-parallel training across real processes: run by CTest as
//   mpirun --allow-run-as-root --oversubscribe -np 2 test_mpi
// (label mpi). Every rank runs every test case in the same order; each also computes the
// single-process reference itself, so the comparisons need no files.
//
// Tolerances: the equivalence tests compute in f64 (Module::to(f64)) over f32 master weights and
// gradients, as training does. One process sums a batch's per-channel statistics and gradients in
// one order; two ranks sum halves and then add the partial sums: the f64 results differ by
// reassociation only (~1e-16 relative), but rounding them to the f32 weights can flip the last bit
// of a weight (2^-24 relative), and a flipped bit feeds the next steps. So after K steps the
// weights may differ by a few f32 ulps of their size: 1e-6 absolute for weights below 1 over 4
// steps. A real error (a local instead of a global statistic, a missing 1/world) moves them by
// 1e-4 and more; the tests check that those cases stay outside the tolerance.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <sstream>
#include <csignal>
#include <thread>

#include "data/array_dataset.h"
#include "engine/cnn.h"
#include "engine/distributed/communicator.h"
#include "layers/batch_norm.h"
#include "layers/registry.h"
#include "train/checkpoint.h"
#include "train/config/config.h"
#include "train/distributed/data_parallel.h"
#include "train/distributed/gradient_reducer.h"
#include "ddp_backward.h"
#include "train/small_run.h"
#include "train/trainer.h"

using namespace cnn;
using distributed::ReduceOp;

namespace {
distributed::CommunicatorPtr world_comm() {
  static distributed::CommunicatorPtr comm = distributed::connect(distributed::detect_world(), Device::cpu(), 60);
  return comm;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_doubles(), y = b.to_doubles();
  REQUIRE(x.size() == y.size());
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
  return worst;
}

// Rows [begin, end) of every rank's share of a batch of n: rank 0 takes the first `first` rows.
std::pair<int64_t, int64_t> share(int rank, int64_t n, int64_t first) { return rank == 0 ? std::pair{0L, first} : std::pair{first, n}; }

// Plain SGD (no momentum), the same on both sides.
void sgd_step(const std::vector<Tensor>& params, double lr) {
  NoGrad no_grad;
  for (const Tensor& p : params) {
    if (!p.grad().defined()) continue;
    Tensor q = p;
    q.copy_(sub(p, scale(p.grad(), lr)));
    p.zero_grad();
  }
}

Tensor flat_parameters(const Module& model) {
  std::vector<double> all;
  for (const Tensor& p : model.parameters()) {
    const std::vector<double> v = p.to_doubles();
    all.insert(all.end(), v.begin(), v.end());
  }
  return Tensor::from_vector(all, {static_cast<int64_t>(all.size())});
}
}  // namespace

namespace {
// A small training run for every rank: rank 0 writes its data (one machine: a shared file system),
// every rank gets the config text, and run options whose console output goes to a string.
struct SharedSmallRun {
  std::unique_ptr<train::testing::SmallRun> data;  // rank 0 only
  std::string text;
  std::ostringstream quiet;
  train::TrainRunOptions options;
  SharedSmallRun(distributed::Communicator& comm, const std::string& name, int train_images, int test_images, uint32_t train_seed,
                 uint32_t test_seed) {
    if (comm.rank() == 0)
      data = std::make_unique<train::testing::SmallRun>(name, train_images, test_images, train_seed, test_seed);
    text = distributed::broadcast_text(comm, data ? data->text : "");
    options.console = &quiet;
  }
};
}  // namespace

TEST_CASE("mpi: the job has two ranks") {
  auto comm = world_comm();
  REQUIRE(comm->world_size() == 2);
  CHECK(std::string(comm->backend()) == "mpi");
  CHECK(comm->world().launcher == distributed::Launcher::mpirun);
}

TEST_CASE("mpi: all_reduce sum, average and max of every dtype") {
  auto comm = world_comm();
  const double mine = comm->rank() + 1;  // 1 and 2
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32}) {
    CAPTURE(dtype_name(dt));
    Tensor t = Tensor::full({1000}, mine, dt);
    comm->all_reduce(t, ReduceOp::sum);
    CHECK(t.to_doubles() == std::vector<double>(1000, 3.0));
    t.fill_(mine);
    comm->all_reduce(t, ReduceOp::max);
    CHECK(t.to_doubles() == std::vector<double>(1000, 2.0));
    if (is_floating(dt)) {
      t.fill_(mine);
      comm->all_reduce(t, ReduceOp::average);
      CHECK(t.to_doubles() == std::vector<double>(1000, 1.5));
    }
  }
  Tensor integers = Tensor::full({4}, mine, DType::i64);
  CHECK_THROWS_WITH_AS(comm->all_reduce(integers, ReduceOp::average), doctest::Contains("would truncate"), Error);
}

TEST_CASE("mpi: collectives in flight together complete in order, broadcast, all_gather, barrier, text") {
  auto comm = world_comm();
  Tensor a = Tensor::full({1 << 16}, comm->rank() + 1.0), b = Tensor::full({7}, 10.0 * (comm->rank() + 1));
  distributed::Pending first = comm->all_reduce_async(a, ReduceOp::sum);
  distributed::Pending second = comm->all_reduce_async(b, ReduceOp::sum);
  first->wait();
  second->wait();
  CHECK(a.to_doubles()[12345] == 3.0);
  CHECK(b.to_doubles()[6] == 30.0);

  Tensor from_one = Tensor::full({5}, comm->rank() == 1 ? 7.0 : 0.0, DType::f16);
  comm->broadcast(from_one, 1);
  CHECK(from_one.to_doubles() == std::vector<double>(5, 7.0));

  const Tensor gathered = comm->all_gather(Tensor::full({3}, static_cast<double>(comm->rank()), DType::i64));
  CHECK(gathered.shape() == Shape({2, 3}));
  CHECK(gathered.to_doubles() == std::vector<double>{0, 0, 0, 1, 1, 1});
  comm->barrier();
  CHECK(distributed::broadcast_text(*comm, comm->rank() == 0 ? "run folder é" : "") == "run folder é");
  CHECK(distributed::all_reduce_values(*comm, {1.0, static_cast<double>(comm->rank())}, ReduceOp::max) ==
        std::vector<double>{1.0, 1.0});
}

TEST_CASE("mpi: checked collectives refuse a call that differs between ranks, on every rank") {
  auto comm = world_comm();
  comm->set_checked(true);
  Tensor same = Tensor::ones({3, 4});
  comm->all_reduce(same, ReduceOp::sum);  // the same call everywhere passes
  CHECK(same.to_doubles()[0] == 2.0);
  Tensor mine = Tensor::ones({comm->rank() == 0 ? 4 : 5});
  CHECK_THROWS_WITH_AS(comm->all_reduce(mine, ReduceOp::sum),
                       doctest::Contains("rank 0: all_reduce (sum) of f32 [4]; rank 1: all_reduce (sum) of f32 [5]"), Error);
  CHECK_THROWS_WITH_AS(comm->broadcast(same, comm->rank()), doctest::Contains("broadcast from rank 1"), Error);
  comm->set_checked(false);
  comm->barrier();
}

TEST_CASE("mpi: the ranks refuse different configs") {
  auto comm = world_comm();
  CHECK_NOTHROW(train::check_same_on_every_rank(*comm, "same", "config"));
  CHECK_THROWS_WITH_AS(train::check_same_on_every_rank(*comm, comm->rank() == 0 ? "a" : "b", "config"),
                       doctest::Contains("rank(s) 1 differ from rank 0"), Error);
}

// Ranks started in other folders (mpirun -wdir a : -wdir b) read other data at the same relative
// path: a crash at the first collective, or, with the same image count, a silent run.
TEST_CASE("mpi: the ranks refuse to train on different data, naming both ranks' views") {
  auto comm = world_comm();
  const Tensor images = Tensor::zeros({4, 2, 2, 1}, DType::u8);
  const data::ArrayDataset same(images, {0, 1, 0, 1}, {"a", "b"}, "data");
  CHECK_NOTHROW(train::check_same_data_on_every_rank(*comm, same, "data/train"));
  const data::ArrayDataset mine(images, {0, 1, 0, 1}, comm->rank() == 0 ? std::vector<std::string>{"a", "b"}
                                                                          : std::vector<std::string>{"x", "y"}, "data");
  const std::string message = [&] {
    try {
      train::check_same_data_on_every_rank(*comm, mine, "data/train");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  }();
  CHECK(message.find("the ranks do not see the same data at data/train: rank 0 sees 4 images, 2 classes [a, b]") !=
        std::string::npos);
  if (comm->rank() == 1) CHECK(message.find("rank 1 sees 4 images, 2 classes [x, y]") != std::string::npos);
}

TEST_CASE("mpi: SyncBN over unequal batches equals batch norm over the whole batch, forward and backward") {
  auto comm = world_comm();
  const int64_t n = 8, c = 5;
  const Tensor x_all = Tensor::randn({n, 3, 2, c}, 21, DType::f64);
  const Tensor residual_all = Tensor::randn({n, 3, 2, c}, 22, DType::f64);
  const Tensor upstream_all = Tensor::randn({n, 3, 2, c}, 23, DType::f64);
  for (BatchNormActivation act : {BatchNormActivation::none, BatchNormActivation::add_relu}) {
    CAPTURE(static_cast<int>(act));
    const auto run = [&](const Tensor& x_in, const Tensor& residual_in, const Tensor& upstream, distributed::Communicator* sync) {
      Tensor x = x_in.clone().requires_grad_();
      Tensor residual = residual_in.clone().requires_grad_();
      Tensor w = Tensor::from_vector<double>({1.0, 0.5, -1.0, 2.0, 0.25}, {c}).requires_grad_();
      Tensor b = Tensor::from_vector<double>({0.0, 0.1, 0.2, -0.3, 1.0}, {c}).requires_grad_();
      Tensor rm = Tensor::zeros({c}, DType::f64), rv = Tensor::ones({c}, DType::f64);
      Tape tape;
      Tensor y;
      {
        Tape::Recording rec(tape);
        y = batch_norm2d(x, w, b, rm, rv, true, 0.1, 1e-5, act, act == BatchNormActivation::add_relu ? residual : Tensor(), sync);
        tape.backward(sum(mul(y, upstream)));
      }
      return std::vector<Tensor>{y, x.grad(), w.grad(), b.grad(), rm, rv,
                                 act == BatchNormActivation::add_relu ? residual.grad() : Tensor::zeros({1}, DType::f64)};
    };
    const std::vector<Tensor> ref = run(x_all, residual_all, upstream_all, nullptr);
    const auto [begin, end] = share(comm->rank(), n, 5);  // 5 and 3 rows
    const std::vector<Tensor> mine =
        run(x_all.slice(begin, end), residual_all.slice(begin, end), upstream_all.slice(begin, end), comm.get());
    CHECK(max_abs_diff(mine[0], ref[0].slice(begin, end)) < 1e-12);  // y
    CHECK(max_abs_diff(mine[1], ref[1].slice(begin, end)) < 1e-12);  // dx
    if (act == BatchNormActivation::add_relu) CHECK(max_abs_diff(mine[6], ref[6].slice(begin, end)) < 1e-12);
    // weight and bias gradients are local sums: over the ranks they make the whole batch's.
    for (int k : {2, 3}) {
      Tensor total = mine[static_cast<size_t>(k)].clone();
      comm->all_reduce(total, ReduceOp::sum);
      CHECK(max_abs_diff(total, ref[static_cast<size_t>(k)]) < 1e-12);
    }
    CHECK(max_abs_diff(mine[4], ref[4]) < 1e-13);  // running statistics: those of the whole batch, on every rank
    CHECK(max_abs_diff(mine[5], ref[5]) < 1e-13);
  }
}

namespace {
// K SGD steps of `name` on batches of 8 (28x28x1 or 32x32x3): one process on the whole batch, or
// this rank on its half with DDP (and SyncBN when asked). Returns the model.
std::unique_ptr<Module> train_steps(const std::string& name, int in_channels, int size, int steps,
                                    distributed::CommunicatorPtr comm, bool sync_bn, uint64_t init_seed) {
  ModelOptions options;
  options.dropout = 0.0;
  std::unique_ptr<Module> model = make_model(name, 10, in_channels, init_seed, options);
  model->to(DType::f64);
  model->train();
  std::unique_ptr<train::GradientReducer> reducer;
  if (comm) {
    if (sync_bn) sync_batch_norm(*model, comm);
    train::broadcast_model(*comm, *model);
    reducer = std::make_unique<train::GradientReducer>(*comm, model->parameters(), 64 * 1024);
  }
  const int64_t n = 8;
  for (int step = 0; step < steps; ++step) {
    Tensor images = Tensor::randn({n, size, size, in_channels}, 100 + step, DType::f64);
    Tensor labels = Tensor::from_vector<int64_t>({0, 3, 1, 9, 4, 4, 7, 2}, {n});
    if (comm) {
      const int64_t half = n / 2, begin = comm->rank() * half;
      images = images.slice(begin, begin + half);
      labels = labels.slice(begin, begin + half);
    }
    testing::ddp_backward(*model, images, labels, reducer.get());
    sgd_step(model->parameters(), 0.05);
  }
  return model;
}

double max_parameter_difference(const Module& a, const Module& b) { return max_abs_diff(flat_parameters(a), flat_parameters(b)); }
}  // namespace

TEST_CASE("mpi: 2 ranks x half batch with SyncBN train the same weights as one process with the whole batch") {
  auto comm = world_comm();
  for (const auto& [name, channels, size] : {std::tuple{"compact_cnn", 1, 28}, std::tuple{"cifar_resnet20", 3, 32}}) {
    CAPTURE(name);
    const auto reference = train_steps(name, channels, size, 4, nullptr, false, 5);
    // Each rank initialises with its own seed: the broadcast from rank 0 must make them equal.
    const auto ddp = train_steps(name, channels, size, 4, comm, true, 5 + 1000 * static_cast<uint64_t>(comm->rank()));
    const double difference = max_parameter_difference(*reference, *ddp);
    MESSAGE(std::string(name) << ": max |weight difference| after 4 steps, 2 ranks + SyncBN vs 1 process: " << difference);
    CHECK(difference < 1e-6);
    // Per-rank statistics (no SyncBN) are a real difference, and it is far outside the tolerance.
    const auto local_statistics = train_steps(name, channels, size, 4, comm, false, 5);
    const double without_sync = max_parameter_difference(*reference, *local_statistics);
    MESSAGE(std::string(name) << ": the same without SyncBN: " << without_sync);
    CHECK(without_sync > 1e-4);
  }
}

TEST_CASE("mpi: without SyncBN the ranks' weights stay bitwise equal while their BatchNorm statistics differ") {
  auto comm = world_comm();
  const auto ddp = train_steps("compact_cnn", 1, 28, 3, comm, false, 7 + static_cast<uint64_t>(comm->rank()));
  const Tensor gathered = comm->all_gather(flat_parameters(*ddp));
  const std::vector<double> both = gathered.to_doubles();
  const size_t half = both.size() / 2;
  CHECK(std::equal(both.begin(), both.begin() + static_cast<std::ptrdiff_t>(half), both.begin() + static_cast<std::ptrdiff_t>(half)));
  double differing_statistic = 0;
  for (const NamedTensor& b : ddp->named_buffers()) {
    if (b.name.find("running_mean") == std::string::npos) continue;
    const Tensor all = comm->all_gather(b.tensor.clone());
    differing_statistic = std::max(differing_statistic, max_abs_diff(all.slice(0, 1), all.slice(1, 2)));
  }
  CHECK(differing_statistic > 1e-6);
}

TEST_CASE("mpi: accumulation of 2 micro-batches under DDP equals DDP with the doubled batch") {
  auto comm = world_comm();
  const auto gradients = [&](int micro_batches) {
    auto model = make_model("mlp", 10, 1, 3);
    model->to(DType::f64);
    train::GradientReducer reducer(*comm, model->parameters(), 4096);  // many buckets
    const Tensor images = Tensor::randn({8, 28, 28, 1}, 40, DType::f64).slice(comm->rank() * 4, comm->rank() * 4 + 4);
    const Tensor labels = Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6, 7, 8}, {8}).slice(comm->rank() * 4, comm->rank() * 4 + 4);
    const int64_t per = 4 / micro_batches;
    for (int k = 0; k < micro_batches; ++k)  // no_sync for all but the last
      testing::ddp_backward(*model, images.slice(k * per, (k + 1) * per), labels.slice(k * per, (k + 1) * per),
                            k == micro_batches - 1 ? &reducer : nullptr, 1.0 / micro_batches);
    CHECK(reducer.reports() == static_cast<int64_t>(model->parameters().size()));
    std::vector<Tensor> grads;
    for (const Tensor& p : model->parameters()) grads.push_back(p.grad().clone());
    return grads;
  };
  const std::vector<Tensor> once = gradients(1), accumulated = gradients(2);
  REQUIRE(once.size() == accumulated.size());
  // f32 gradients: the two micro-batches' sums are rounded to f32 once more than the single batch's.
  for (size_t i = 0; i < once.size(); ++i) {
    const std::vector<double> g = once[i].to_doubles();
    double largest = 0;
    for (double v : g) largest = std::max(largest, std::abs(v));
    CHECK(max_abs_diff(once[i], accumulated[i]) <= 1e-6 * largest);
  }
}

TEST_CASE("mpi: cnn_train on 2 ranks learns, writes one run folder, resumes on 1 rank in the middle of its epoch, and once finished does nothing") {
  auto comm = world_comm();
  // Rank 0 makes the data; both ranks read it (one machine: a shared file system).
  SharedSmallRun shared(*comm, "mpi", 320, 64, 5, 6);
  const std::string& text = shared.text;
  std::ostringstream& quiet = shared.quiet;
  train::TrainRunOptions& options = shared.options;
  // 320 images in shards of 160: 5 batches of 32 per rank and epoch; stop after 7 steps (epoch 2, step 2).
  const std::vector<std::string> stop = {"train.epochs=3", "train.max_steps=7", "data.drop_last=true", "train.threads=1"};
  const train::TrainSummary first = train::run_training(train::Config::parse(text, "test.ini", stop), options);
  CHECK(first.steps == 7);
  CHECK(first.best_top1 > 50);  // 4 easy classes: the shared model learns
  if (comm->rank() == 0) {
    CHECK(std::filesystem::exists(first.run_dir / "last.h5"));
    const train::TrainingState saved = train::load_checkpoint(first.run_dir / "last.h5");
    CHECK(saved.world_size == 2);
    CHECK(saved.epoch == 1);
    CHECK(saved.samples_in_epoch == 2 * 32 * 2);  // two batches of 32 on each of 2 ranks
    // Alone now: the 2-rank step 7 counts as step 14 of batch 32, and the rest of epoch 2 (320 -
    // 128 = 192 samples) makes 6 steps, then epoch 3 has 10: 30 steps in all.
    train::TrainRunOptions alone = options;
    alone.world = distributed::World{};
    alone.resume = first.run_dir.string();
    const train::TrainSummary second = train::run_training(
        train::Config::parse(text, "test.ini", {"train.epochs=3", "train.max_steps=0", "data.drop_last=true", "train.threads=1"}),
        alone);  // max_steps=0: the run's own limit of 7 would hold otherwise
    CHECK(second.steps == 14 + 6 + 10);
    CHECK(second.epochs_run == 2);
    CHECK(second.best_top1 > 50);
  }
  comm->barrier();
  // Resumed on 2 ranks once more, the finished run does nothing on either rank, and neither waits
  // for the other.
  train::TrainRunOptions again = options;
  again.resume = first.run_dir.string();
  const train::TrainSummary nothing = train::run_training(
      train::Config::parse(text, "test.ini", {"train.epochs=3", "data.drop_last=true", "train.threads=1"}), again);
  CHECK(nothing.epochs_run == 0);
  CHECK(nothing.steps == 30);
  if (comm->rank() == 0) CHECK(quiet.str().find("the run already finished: epoch 3/3") != std::string::npos);
  comm->barrier();
}

TEST_CASE("mpi: inf/nan gradients on one rank make every rank skip the step (fp16 lowers the scale on both)") {
  auto comm = world_comm();
  SharedSmallRun shared(*comm, "mpi_inf", 128, 32, 7, 8);
  const std::string& text = shared.text;
  train::TrainRunOptions& options = shared.options;
  // After the all-reduce, rank 1 alone sees an inf at step 2: a local verdict would let rank 0 step.
  options.on_gradients = [&](int64_t step, const std::vector<Tensor>& gradients) {
    if (comm->rank() != 1 || step != 2) return;
    Tensor poisoned = gradients.front();
    poisoned.fill_(std::numeric_limits<double>::infinity());
  };
  const train::TrainSummary s = train::run_training(
      train::Config::parse(text, "test.ini", {"train.epochs=2", "precision.mode=fp16", "train.threads=1", "data.val_path="}),
      options);
  CHECK(s.steps == 4);  // 64 images per rank: 2 steps of 32 per epoch
  CHECK(s.skipped_steps == 1);
  CHECK(distributed::all_reduce_value(*comm, static_cast<double>(s.skipped_steps), ReduceOp::sum) == 2);
}

// Run by tests/distributed/run_failure_tests.sh only (skipped otherwise): rank 1 dies mid-job, the
// job must end with an error instead of hanging.
TEST_CASE("mpi: a killed rank ends the job" * doctest::skip()) {
  auto comm = world_comm();
  Tensor t = Tensor::ones({16});
  comm->all_reduce(t, ReduceOp::sum);
  if (comm->rank() == 1) std::raise(SIGKILL);
  for (int i = 0; i < 1000; ++i) comm->all_reduce(t, ReduceOp::sum);  // rank 0 waits for a rank that is gone
}

// Also run by the failure script: rank 1 hangs (alive, never arrives); rank 0 reports the
// collective after the timeout and ends the job.
TEST_CASE("mpi: a hung rank is reported after the timeout" * doctest::skip()) {
  auto comm = world_comm();
  comm->set_timeout_seconds(3);
  Tensor t = Tensor::ones({16});
  if (comm->rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(60));
  comm->all_reduce(t, ReduceOp::sum);
}
