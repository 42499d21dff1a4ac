// Uploads on the copy stream (engine/async_copy.h) and the loader that uses them (label gpu): the
// data arrives intact, the compute stream waits for it, a copy never lands in memory that queued
// kernels still read or that the compute stream has handed out again, and batches abandoned by an
// epoch restart leave nothing behind.
#include <doctest/doctest.h>

#include <memory>

#include "agreement.h"
#include "data/array_dataset.h"
#include "data/loader.h"
#include "engine/async_copy.h"

using namespace cnn;
using namespace cnn::testing;

namespace {
Tensor pinned_copy(const Tensor& t) {
  Tensor p = Tensor::empty(t.shape(), t.dtype(), Device::cpu(), /*pinned=*/true);
  p.copy_(t);
  return p;
}

// A long chain of matrix products that reads `a` in every step, enqueued on the compute stream.
Tensor chain(const Tensor& a, Tensor x, int steps) {
  for (int i = 0; i < steps; ++i) x = matmul(a, x);
  return x;
}
}  // namespace

TEST_CASE("gpu: upload_async copies pinned tensors and the compute stream reads them only after the copy") {
  const Tensor host = pinned_copy(u({4096, 4096}, 21));  // 64 MiB: the copy takes a while
  const Upload up = upload_async({host}, Device::cuda());
  up.make_compute_wait();
  const Tensor doubled = scale(up.tensors[0], 2.0);
  CHECK(doubled.to(Device::cpu()).to_doubles() == scale(host, 2.0).to_doubles());
  up.wait_host();
  CHECK(up.finished());
}

TEST_CASE("gpu: an upload into a block just freed by queued kernels waits for those kernels") {
  const Tensor a_host = u({1024, 1024}, 30), b_host = u({1024, 1024}, 31, -0.01, 0.01);
  Tensor a = a_host.to(Device::cuda());
  const Tensor product = chain(a, b_host.to(Device::cuda()), 8);  // queued, still reading a
  const void* freed = a.data();
  a = Tensor();  // back to the compute stream's pool while the chain runs
  const Tensor other = pinned_copy(u({1024, 1024}, 32));
  const Upload up = upload_async({other}, Device::cuda());
  CHECK(up.tensors[0].data() == freed);  // the same block: the case that needs the ordering
  up.make_compute_wait();
  CHECK(max_rel_diff(product, chain(a_host, b_host, 8)) < 1e-3);  // a was not overwritten mid-chain
  CHECK(up.tensors[0].to(Device::cpu()).to_doubles() == other.to_doubles());
}

TEST_CASE("gpu: a loader with a CUDA device delivers what the CPU loader delivers, also after abandoning batches") {
  constexpr int64_t kImages = 300;
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < kImages; ++i) labels.push_back(i % 7);
  const Tensor pixels = u({kImages, 12, 12, 3}, 23, 0, 255).to(DType::u8);
  auto dataset = std::make_shared<data::ArrayDataset>(pixels, labels, std::vector<std::string>(7, "c"), "random");
  data::LoaderOptions o;
  o.batch_size = 32;
  o.workers = 3;
  o.prefetch = 2;  // fewer pinned slots than batches: slots are recycled under uploads
  o.shuffle = true;
  o.seed = 5;
  const data::Pipeline pipeline({}, 12, 12, 3, data::Normalize::imagenet());
  data::Loader on_cpu(dataset, pipeline, o);
  o.device = Device::cuda();
  data::Loader on_gpu(dataset, pipeline, o);
  const Tensor a = u({1024, 1024}, 24, -0.03, 0.03).to(Device::cuda());

  // Abandon an epoch with batches in flight behind a busy compute stream, then take blocks of the
  // batches' size from the compute stream's pool and fill them: no late copy may land in them.
  on_gpu.start_epoch(0);
  const std::optional<data::Batch> first = on_gpu.next();
  REQUIRE(first.has_value());
  const Shape batch_shape = first->images.shape();
  const Tensor busy = chain(a, a, 20);
  on_gpu.start_epoch(1);
  std::vector<Tensor> filled;
  for (int i = 0; i < 8; ++i) filled.push_back(Tensor::full(batch_shape, i, DType::f32, Device::cuda()));
  for (int i = 0; i < 8; ++i)
    CHECK(filled[static_cast<size_t>(i)].to(Device::cpu()).to_doubles() == Tensor::full(batch_shape, i).to_doubles());

  for (int64_t epoch = 1; epoch < 4; ++epoch) {
    on_cpu.start_epoch(epoch);
    if (epoch > 1) on_gpu.start_epoch(epoch);
    int64_t step = 0;
    while (auto expected = on_cpu.next()) {
      auto got = on_gpu.next();
      REQUIRE(got.has_value());
      CHECK(got->images.device() == Device::cuda());
      // Every other batch is dropped unread, while the compute stream is still busy, so its
      // pinned slot is recycled under a copy that may not have finished.
      if (++step % 2 == 0) {
        chain(a, a, 4);
        continue;
      }
      CHECK(got->images.to(Device::cpu()).to_doubles() == expected->images.to_doubles());
      CHECK(got->labels.to(Device::cpu()).to_doubles() == expected->labels.to_doubles());
    }
    CHECK(!on_gpu.next().has_value());
  }
}
