// Uploads on the copy stream (engine/async_copy.h) and the loader that uses them (label gpu): the
// data arrives intact, the compute stream waits for it, and pinned buffers are not reused under a
// copy in flight, also while the compute stream is kept busy.
#include <doctest/doctest.h>

#include <memory>

#include "agreement.h"
#include "data/array_dataset.h"
#include "data/loader.h"
#include "engine/async_copy.h"

using namespace cnn;
using namespace cnn::testing;

TEST_CASE("gpu: upload_async copies pinned tensors and orders the compute stream after the copy") {
  Tensor host = Tensor::empty({256, 1024}, DType::f32, Device::cpu(), /*pinned=*/true);
  host.copy_(u({256, 1024}, 21));
  const Tensor expected = mul(host, host);
  // Busy compute stream: the copy must still come after the work queued before it, and the
  // consumer's kernel after the copy.
  Tensor busy = u({2048, 2048}, 22).to(Device::cuda());
  for (int i = 0; i < 4; ++i) busy = matmul(busy, busy);
  const Upload up = upload_async({host}, Device::cuda());
  up.make_compute_wait();
  const Tensor on_device = mul(up.tensors[0], up.tensors[0]);
  CHECK(on_device.to(Device::cpu()).to_doubles() == expected.to_doubles());
  up.wait_host();
  CHECK(up.finished());
}

TEST_CASE("gpu: a loader with a CUDA device delivers what the CPU loader delivers, epoch after epoch") {
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
  Tensor busy = u({1024, 1024}, 24).to(Device::cuda());
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    on_cpu.start_epoch(epoch);
    on_gpu.start_epoch(epoch);
    while (auto expected = on_cpu.next()) {
      auto got = on_gpu.next();
      REQUIRE(got.has_value());
      CHECK(got->images.device() == Device::cuda());
      busy = matmul(busy, busy);  // keeps the compute stream behind the host
      CHECK(got->images.to(Device::cpu()).to_doubles() == expected->images.to_doubles());
      CHECK(got->labels.to(Device::cpu()).to_doubles() == expected->labels.to_doubles());
    }
    CHECK(!on_gpu.next().has_value());
  }
}
