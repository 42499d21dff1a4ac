// bench_allreduce: time and bandwidth of the communicator's all-reduce across the ranks of a job,
// for message sizes from 4 KiB to 256 MiB (doubling), in the manner of nccl-tests' all_reduce_perf.
// It measures what data-parallel training pays per gradient bucket: the same communicator
// (engine/distributed/communicator.h) the trainer connects to, so MPI on the CPU and NCCL on GPUs.
//
//   mpirun -np 2 build/bench/bench_allreduce                      (CPU ranks over MPI; add
//                                                                  --allow-run-as-root --oversubscribe when needed)
//   mpirun -np 8 build/bench/bench_allreduce --device cuda        (one GPU per rank, cuda:LOCAL_RANK, over NCCL)
//   srun --ntasks-per-node=8 --gpus-per-node=8 bench_allreduce    (Slurm), or a torchrun-style launch (NCCL only)
//
//   bench_allreduce [--min-bytes 4K] [--max-bytes 256M] [--iters 20] [--warmup 5] [--device cpu|cuda[:N]]
//                   [--dtype f32|f16|bf16] [--op sum|average|max] [--json OUT]
//
// Per size: `warmup` untimed all-reduces, a barrier, then `iters` all-reduces in place timed
// together (on CUDA the compute stream, which waits for each collective, is synchronised before the
// clock is read); the time per all-reduce is the slowest rank's. algbw = bytes / time;
// busbw = algbw * 2(n-1)/n, nccl-tests' bus bandwidth for all-reduce: the share of the bytes a ring
// all-reduce moves over each rank's link, comparable with the link's bandwidth whatever n is. The
// timed tensor holds zeros (so that repeated sums stay finite); before it, a separate tensor filled
// on rank r with (r+1) * (1 + i % 4) at element i is reduced once and checked on every rank against
// n(n+1)/2, (n+1)/2 or n times (1 + i % 4) for sum, average and max: "ok" or "WRONG" per size, and
// the exit status is 1 when any size was wrong. MPI carries f16 and bf16 through an f32 copy, which
// the times include (training pays it too). Rank 0 alone prints the table and writes the JSON. With
// a single rank the single backend runs: its all-reduce is the identity, so nothing is communicated
// and the numbers only show the call's overhead.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/cnn.h"
#include "engine/distributed/communicator.h"

using namespace cnn;
namespace dist = cnn::distributed;

namespace {
using Clock = std::chrono::steady_clock;

dist::ReduceOp parse_op(const std::string& text) {
  if (text == "sum") return dist::ReduceOp::sum;
  if (text == "average") return dist::ReduceOp::average;
  return dist::ReduceOp::max;
}

// The value every element i should hold after the all-reduce, over the check's fill.
double expected_value(dist::ReduceOp op, int n, int64_t i) {
  const double w = static_cast<double>(1 + i % 4);
  switch (op) {
    case dist::ReduceOp::sum: return w * n * (n + 1) / 2.0;
    case dist::ReduceOp::average: return w * (n + 1) / 2.0;
    case dist::ReduceOp::max: return w * n;
  }
  return 0;
}

// Relative tolerance of the check: exact for small worlds in every dtype, but a ring's partial
// sums (and NCCL's pre-multiplied average) may round once per rank in 16-bit floats.
double tolerance(DType dtype, int n) {
  const double unit = dtype == DType::f16 ? 0x1p-10 : dtype == DType::bf16 ? 0x1p-7 : 0x1p-23;
  return unit * (n + 1);
}

// Rank r's fill of the check: (r+1) * (1 + i % 4), in `dtype` on `device`.
Tensor check_input(int64_t elements, int rank, DType dtype, Device device) {
  Tensor host = Tensor::empty({elements}, DType::f32, Device::cpu());
  float* p = host.data_as<float>();
  for (int64_t i = 0; i < elements; ++i) p[i] = static_cast<float>((rank + 1) * (1 + i % 4));
  NoGrad no_grad;
  if (dtype != DType::f32) host = host.to(dtype);
  return host.to(device);
}

// Elements of `result` that differ from the expected reduction; the first is described in `first`.
int64_t count_wrong(const Tensor& result, dist::ReduceOp op, int n, std::string& first) {
  NoGrad no_grad;
  Tensor host = result.to(Device::cpu());
  if (host.dtype() != DType::f32) host = host.to(DType::f32);
  const float* p = host.data_as<float>();
  const double tol = tolerance(result.dtype(), n);
  int64_t wrong = 0;
  for (int64_t i = 0; i < host.numel(); ++i) {
    const double want = expected_value(op, n, i), got = p[i];
    if (std::fabs(got - want) <= tol * want) continue;
    if (wrong++ == 0) first = "element " + std::to_string(i) + " is " + std::to_string(got) + ", expected " + std::to_string(want);
  }
  return wrong;
}

struct Row {
  int64_t bytes = 0, elements = 0;
  double time_us = 0, algbw_gbps = 0, busbw_gbps = 0;
  bool ok = true;
};
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Times the all-reduce of the distributed communicator (MPI or NCCL) across the ranks of a job."};
  uint64_t min_bytes = 4 << 10, max_bytes = 256ull << 20;
  int iters = 20, warmup = 5;
  std::string device_text = cuda::is_available() ? "cuda" : "cpu", dtype_text = "f32", op_text = "sum", json_path;
  app.add_option("--min-bytes", min_bytes, "smallest message, bytes (suffixes K, M, G: powers of 1024)")
      ->transform(CLI::AsSizeValue(false));
  app.add_option("--max-bytes", max_bytes, "largest message, bytes; sizes double from --min-bytes")
      ->transform(CLI::AsSizeValue(false));
  app.add_option("--iters", iters, "timed all-reduces per size")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "untimed all-reduces per size first")->check(CLI::NonNegativeNumber);
  app.add_option("--device", device_text, "cpu (MPI) or cuda (NCCL; cuda:LOCAL_RANK on each rank) or cuda:N")
      ->capture_default_str();
  app.add_option("--dtype", dtype_text, "element type")->check(CLI::IsMember({"f32", "f16", "bf16"}))->capture_default_str();
  app.add_option("--op", op_text, "reduction")->check(CLI::IsMember({"sum", "average", "max"}))->capture_default_str();
  app.add_option("--json", json_path, "also write the results here (rank 0)");
  CLI11_PARSE(app, argc, argv);

  dist::CommunicatorPtr comm;
  try {
    const dist::World world = dist::detect_world();
    Device device = Device::parse(device_text);
    // As the trainer: plain "cuda" in a job of several ranks is each rank's own GPU.
    const bool per_rank_gpu = device_text == "cuda" && world.distributed();
    if (per_rank_gpu) device = Device::cuda(world.local_rank);
    const DType dtype = parse_dtype(dtype_text);
    const dist::ReduceOp op = parse_op(op_text);
    const auto element_bytes = static_cast<uint64_t>(dtype_size(dtype));
    CNN_CHECK(min_bytes >= element_bytes, "--min-bytes ", min_bytes, " is less than one ", dtype_text, " element");
    CNN_CHECK(max_bytes >= min_bytes, "--max-bytes ", max_bytes, " is below --min-bytes ", min_bytes);
    if (device.is_cuda()) cuda::require_device(device.index);

    comm = dist::connect(world, device);
    const int n = comm->world_size();
    const bool main_rank = comm->rank() == 0;
    CNN_CHECK(!(std::string(comm->backend()) == "mpi" && max_bytes / element_bytes > static_cast<uint64_t>(INT_MAX)),
              "--max-bytes ", max_bytes, ": MPI counts elements in an int; at most ", INT_MAX, " ", dtype_text, " elements");
    const auto sync = [&] {
      if (device.is_cuda()) cuda::synchronize(device.index);
    };
    const std::string device_shown = per_rank_gpu ? "cuda (cuda:LOCAL_RANK on each rank)" : device.str();
    const std::string device_json = per_rank_gpu ? "cuda" : device.str();

    if (main_rank) {
      std::printf("all_reduce (%s) over %s: %d rank%s, device %s, dtype %s; %d timed after %d warm-up per size\n",
                  dist::reduce_op_name(op), comm->backend(), n, n == 1 ? "" : "s", device_shown.c_str(), dtype_text.c_str(), iters,
                  warmup);
      if (n == 1)
        std::printf("a single rank: the single backend's all-reduce is the identity; this measures no communication, "
                    "only the call's overhead (launch with mpirun -np N for N ranks)\n");
      std::printf("%14s %12s %12s %13s %13s  %s\n", "bytes", "elements", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "check");
      std::fflush(stdout);
    }

    std::vector<Row> rows;
    bool all_ok = true;
    for (uint64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
      Row row;
      row.elements = static_cast<int64_t>(bytes / element_bytes);
      row.bytes = row.elements * static_cast<int64_t>(element_bytes);

      // The check: one all-reduce of the pattern, verified on every rank, the verdict shared.
      std::string first;
      int64_t wrong = 0;
      {
        const Tensor pattern = check_input(row.elements, comm->rank(), dtype, device);
        comm->all_reduce(pattern, op);
        wrong = count_wrong(pattern, op, n, first);
      }
      if (wrong > 0)
        std::fprintf(stderr, "bench_allreduce: rank %d: %lld of %lld elements wrong after the %lld-byte all_reduce (%s): %s\n",
                     comm->rank(), static_cast<long long>(wrong), static_cast<long long>(row.elements),
                     static_cast<long long>(row.bytes), dist::reduce_op_name(op), first.c_str());
      row.ok = dist::all_reduce_value(*comm, wrong > 0 ? 1.0 : 0.0, dist::ReduceOp::max) == 0.0;
      all_ok = all_ok && row.ok;

      // The timing.
      const Tensor data = Tensor::zeros({row.elements}, dtype, device);
      for (int i = 0; i < warmup; ++i) comm->all_reduce(data, op);
      sync();
      comm->barrier();
      const Clock::time_point start = Clock::now();
      for (int i = 0; i < iters; ++i) comm->all_reduce(data, op);
      sync();
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count() / iters;
      const double slowest = dist::all_reduce_value(*comm, seconds, dist::ReduceOp::max);

      row.time_us = slowest * 1e6;
      row.algbw_gbps = static_cast<double>(row.bytes) / std::max(slowest, 1e-12) / 1e9;
      row.busbw_gbps = row.algbw_gbps * 2.0 * (n - 1) / n;
      rows.push_back(row);
      if (main_rank) {
        std::printf("%14lld %12lld %12.2f %13.3f %13.3f  %s\n", static_cast<long long>(row.bytes),
                    static_cast<long long>(row.elements), row.time_us, row.algbw_gbps, row.busbw_gbps, row.ok ? "ok" : "WRONG");
        std::fflush(stdout);
      }
      if (bytes > UINT64_MAX / 2) break;
    }

    if (main_rank) {
      double busbw_sum = 0;
      for (const Row& r : rows) busbw_sum += r.busbw_gbps;
      std::printf("average bus bandwidth %.3f GB/s over %zu sizes; %s\n", rows.empty() ? 0.0 : busbw_sum / rows.size(), rows.size(),
                  all_ok ? "every result correct" : "SOME RESULTS WRONG (see the messages above)");
      if (!json_path.empty()) {
        nlohmann::json out_rows = nlohmann::json::array();
        for (const Row& r : rows)
          out_rows.push_back({{"bytes", r.bytes}, {"elements", r.elements}, {"time_us", r.time_us}, {"algbw_gbps", r.algbw_gbps},
                              {"busbw_gbps", r.busbw_gbps}, {"ok", r.ok}});
        const nlohmann::json doc = {{"benchmark", "allreduce"}, {"backend", comm->backend()}, {"world_size", n},
                                    {"device", device_json},    {"dtype", dtype_text},        {"op", dist::reduce_op_name(op)},
                                    {"iters", iters},           {"warmup", warmup},           {"rows", out_rows}};
        std::ofstream file(json_path);
        CNN_CHECK(file.good(), "cannot write ", json_path);
        file << doc.dump(2) << "\n";
        std::printf("wrote %s\n", json_path.c_str());
      }
    }
    return all_ok ? 0 : 1;
  } catch (const Error& e) {
    // The other ranks would wait for this one in their next collective until the timeout.
    if (comm && comm->world_size() > 1) comm->abort(std::string("bench_allreduce: ") + e.what());
    std::fprintf(stderr, "bench_allreduce: %s\n", e.what());
    return 1;
  }
}
