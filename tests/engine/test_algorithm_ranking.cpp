// The walk down a library's algorithm ranking (kernels/common/algorithm_ranking.h), which the cuDNN
// convolutions run through: tested here with fake attempts, since the real ones need a GPU; and the
// workspace a measured search offers (engine/cudnn_conv.h).
#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <vector>

#include "engine/cudnn_conv.h"
#include "error_message.h"
#include "kernels/common/algorithm_ranking.h"

using namespace cnn;
using namespace cnn::kernels;
using cnn::testing::error_message;

namespace {
AlgorithmRanking three_entries() {
  return AlgorithmRanking({{1, 0, 0, "winograd"}, {2, 0, 1 << 30, "fft"}, {3, 0, 4096, "implicit_gemm"}});
}
}  // namespace

TEST_CASE("algorithm ranking: the first entry that runs is used, and nothing else is tried") {
  AlgorithmRanking ranking = three_entries();
  std::vector<std::string> tried;
  const RankedAlgorithm& used = ranking.run("conv2d forward", [&](const RankedAlgorithm& e) {
    tried.push_back(e.name);
    return AttemptOutcome::ran;
  });
  CHECK(used.name == "winograd");
  CHECK(tried == std::vector<std::string>{"winograd"});
  CHECK(ranking.demoted() == 0);
}

TEST_CASE("algorithm ranking: an entry turned down or without workspace is demoted for later calls") {
  AlgorithmRanking ranking = three_entries();
  std::vector<std::string> tried;
  const auto attempt = [&](const RankedAlgorithm& e) {
    tried.push_back(e.name);
    if (e.name == "winograd") return AttemptOutcome::not_supported;
    if (e.workspace > (1 << 20)) return AttemptOutcome::workspace_unavailable;
    return AttemptOutcome::ran;
  };
  CHECK(ranking.run("conv2d forward", attempt).name == "implicit_gemm");
  CHECK(tried == std::vector<std::string>{"winograd", "fft", "implicit_gemm"});
  CHECK(ranking.demoted() == 2);
  CHECK(ranking.current().name == "implicit_gemm");
  // The next call starts at the entry that ran: no failed attempt is repeated.
  tried.clear();
  CHECK(ranking.run("conv2d forward", attempt).name == "implicit_gemm");
  CHECK(tried == std::vector<std::string>{"implicit_gemm"});
}

TEST_CASE("algorithm ranking: when no entry runs, the error names the call and every entry's reason") {
  AlgorithmRanking ranking = three_entries();
  const std::string message = error_message([&] {
    ranking.run("conv2d backward-filter (f16, input [256,56,56,64])", [](const RankedAlgorithm& e) {
      return e.workspace > 0 ? AttemptOutcome::workspace_unavailable : AttemptOutcome::not_supported;
    });
  });
  CHECK(message.find("conv2d backward-filter (f16, input [256,56,56,64])") != std::string::npos);
  CHECK(message.find("winograd: not supported") != std::string::npos);
  CHECK(message.find("fft: its workspace of 1073741824 bytes could not be allocated") != std::string::npos);
  CHECK(message.find("implicit_gemm: its workspace of 4096 bytes") != std::string::npos);
  CHECK(message.find("lower the batch size") != std::string::npos);
  // Everything is demoted now: a later call fails at once, saying so.
  CHECK(error_message([&] { ranking.run("conv2d", [](const RankedAlgorithm&) { return AttemptOutcome::ran; }); })
            .find("3 failed earlier") != std::string::npos);
  CHECK(error_message([&] { (void)ranking.current(); }).find("every algorithm") != std::string::npos);
  AlgorithmRanking empty({});
  CHECK(error_message([&] { empty.run("conv2d", [](const RankedAlgorithm&) { return AttemptOutcome::ran; }); })
            .find("the ranking is empty") != std::string::npos);
}

TEST_CASE("algorithm ranking: a call's description is made only when no algorithm could run") {
  AlgorithmRanking ranking = three_entries();
  int described = 0;
  const auto what = [&] {
    ++described;
    return std::string("conv2d forward (f32, input [8,32,32,3])");
  };
  ranking.run(what, [](const RankedAlgorithm&) { return AttemptOutcome::ran; });
  CHECK(described == 0);  // the usual call formats nothing
  CHECK(error_message([&] { ranking.run(what, [](const RankedAlgorithm&) { return AttemptOutcome::not_supported; }); })
            .starts_with("conv2d forward (f32, input [8,32,32,3]): no algorithm"));
  CHECK(described == 1);
}

TEST_CASE("algorithm ranking: threads demoting at once keep the furthest demotion") {
  AlgorithmRanking ranking({{0, 0, 0, "a"}, {1, 0, 0, "b"}, {2, 0, 0, "c"}, {3, 0, 0, "d"}});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int repeat = 0; repeat < 100; ++repeat)
        CHECK(ranking.run("conv2d", [](const RankedAlgorithm& e) {
                       return e.name == "d" ? AttemptOutcome::ran : AttemptOutcome::not_supported;
                     }).name == "d");
    });
  for (std::thread& t : threads) t.join();
  CHECK(ranking.demoted() == 3);
}

TEST_CASE("the workspace a measured cuDNN search offers fits in what the allocator has without emptying its cache") {
  // Before, the search offered the largest workspace any algorithm asked for (GBs for some FFT and
  // GEMM algorithms at batch 256): the allocator emptied its cache to find it, or failed.
  constexpr size_t MiB = size_t{1} << 20, GiB = size_t{1} << 30;
  const std::vector<size_t> requests = {0, 4 * MiB, 300 * MiB, 6 * GiB, 64 * MiB};
  using cnn::cudnn_conv::find_workspace_offer;
  SUBCASE("plenty free on the device: the largest request") {
    CHECK(find_workspace_offer(requests, 40 * GiB, 0, 256 * MiB) == 6 * GiB);
  }
  SUBCASE("little free: the largest request below free memory less the margin; those above are left out") {
    CHECK(find_workspace_offer(requests, 2 * GiB, 0, 256 * MiB) == 300 * MiB);
    CHECK(find_workspace_offer(requests, 300 * MiB, 0, 256 * MiB) == 4 * MiB);  // 44 MiB after the margin
  }
  SUBCASE("a cached free block counts when it is larger than what the device has free") {
    CHECK(find_workspace_offer(requests, 100 * MiB, 512 * MiB, 256 * MiB) == 300 * MiB);
    CHECK(find_workspace_offer(requests, 100 * MiB, 64 * MiB, 256 * MiB) == 64 * MiB);  // exactly the block
  }
  SUBCASE("nothing fits: no workspace, and only algorithms that need none compete") {
    CHECK(find_workspace_offer({8 * MiB, 16 * MiB}, 10 * MiB, 0, 256 * MiB) == 0);
    CHECK(find_workspace_offer({}, 40 * GiB, 0, 256 * MiB) == 0);
  }
}
