// bench_conv: forward, backward-data and backward-filter times of convolutions.
//
//   bench_conv [--set resnet50|efficientnet_b0|all] [--batch 32,256] [--shapes FILE] [--device cpu|cuda[:N]]
//              [--dtype f32|f16|bf16] [--repeats R] [--warmup W] [--benchmark] [--json OUT] [--limit K]
//
// Shape sets: every distinct convolution of torchvision's ResNet-50 at 224x224 (with how often it
// occurs), EfficientNet-B0's depthwise and pointwise convolutions, and/or a user file with one
// convolution per line: `name h w c o kh kw stride pad [dilation groups]` (batch from --batch).
// Prints a table (median time after warm-up; TFLOP/s counted as direct convolution, 2*N*OH*OW*O*KH*KW*C/g;
// on CUDA the cuDNN algorithm and workspace, on the CPU the share of the time spent in the GEMMs
// and the rate OpenBLAS reaches on those GEMMs alone) and writes the numbers as JSON.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/cnn.h"
#include "engine/cudnn_conv.h"
#include "median_time.h"
#include "kernels/common/window.h"
#include "kernels/conv.h"
#include "kernels/gemm.h"

using namespace cnn;
using cnn::bench::median_seconds;
using kernels::ConvGeometry;

namespace {
struct ConvShape {
  std::string name;
  int64_t h, w, c, o, kh, kw;
  int stride, pad, dilation = 1, groups = 1;
  int count = 1;  // occurrences in the network
};

// Every distinct convolution of ResNet-50 (v1.5: stride on the 3x3), with occurrence counts.
std::vector<ConvShape> resnet50_shapes() {
  std::vector<ConvShape> s = {{"conv1", 224, 224, 3, 64, 7, 7, 2, 3}};
  struct Stage {
    int64_t size, in, mid, out;
    int blocks;
  };
  const Stage stages[] = {{56, 64, 64, 256, 3}, {56, 256, 128, 512, 4}, {28, 512, 256, 1024, 6}, {14, 1024, 512, 2048, 3}};
  int index = 1;
  for (const Stage& st : stages) {
    const std::string p = "layer" + std::to_string(index);
    const int stride = index == 1 ? 1 : 2;
    const int64_t out_size = st.size / stride;
    s.push_back({p + ".0.conv1", st.size, st.size, st.in, st.mid, 1, 1, 1, 0});
    s.push_back({p + ".0.conv2", st.size, st.size, st.mid, st.mid, 3, 3, stride, 1});
    s.push_back({p + ".0.conv3", out_size, out_size, st.mid, st.out, 1, 1, 1, 0});
    s.push_back({p + ".0.downsample", st.size, st.size, st.in, st.out, 1, 1, stride, 0});
    const int rest = st.blocks - 1;
    s.push_back({p + ".x.conv1", out_size, out_size, st.out, st.mid, 1, 1, 1, 0, 1, 1, rest});
    s.push_back({p + ".x.conv2", out_size, out_size, st.mid, st.mid, 3, 3, 1, 1, 1, 1, rest});
    s.push_back({p + ".x.conv3", out_size, out_size, st.mid, st.out, 1, 1, 1, 0, 1, 1, rest});
    ++index;
  }
  return s;
}

// EfficientNet-B0's depthwise and pointwise (expand and project) convolutions at 224x224.
std::vector<ConvShape> efficientnet_b0_shapes() {
  struct Stage {
    int expand, k, stride;
    int64_t in, out;
    int layers;
  };
  const Stage stages[] = {{1, 3, 1, 32, 16, 1},  {6, 3, 2, 16, 24, 2},   {6, 5, 2, 24, 40, 2},  {6, 3, 2, 40, 80, 3},
                          {6, 5, 1, 80, 112, 3}, {6, 5, 2, 112, 192, 4}, {6, 3, 1, 192, 320, 1}};
  std::vector<ConvShape> s;
  int64_t size = 112;
  int index = 1;
  for (const Stage& st : stages) {
    for (int layer = 0; layer < st.layers; ++layer) {
      const int64_t in = layer == 0 ? st.in : st.out, hidden = in * st.expand;
      const int stride = layer == 0 ? st.stride : 1;
      const std::string p = "stage" + std::to_string(index) + "." + std::to_string(layer);
      if (st.expand != 1) s.push_back({p + ".expand", size, size, in, hidden, 1, 1, 1, 0});
      s.push_back({p + ".depthwise", size, size, hidden, hidden, st.k, st.k, stride, st.k / 2, 1, static_cast<int>(hidden)});
      size /= stride;
      s.push_back({p + ".project", size, size, hidden, st.out, 1, 1, 1, 0});
    }
    ++index;
  }
  return s;
}

std::vector<ConvShape> read_shapes(const std::string& path) {
  std::ifstream in(path);
  CNN_CHECK(in.good(), "bench_conv: cannot open shape file ", path);
  std::vector<ConvShape> s;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    ConvShape c;
    fields >> c.name >> c.h >> c.w >> c.c >> c.o >> c.kh >> c.kw >> c.stride >> c.pad;
    CNN_CHECK(!fields.fail(), path, ":", number, ": expected `name h w c o kh kw stride pad [dilation groups]`");
    if (!(fields >> c.dilation)) c.dilation = 1;
    if (!(fields >> c.groups)) c.groups = 1;
    s.push_back(c);
  }
  return s;
}

ConvGeometry geometry(const ConvShape& s, int64_t batch) {
  return kernels::square_conv_geometry(batch, s.h, s.w, s.c, s.o, s.kh, s.kw, s.stride, s.pad, s.dilation, s.groups);
}

struct Options {
  std::string set = "all", shapes_file, json = "bench_conv.json";
  CpuConvolutions cpu_convolutions = ::cnn::cpu_convolutions();  // the build's default
  std::vector<int64_t> batches;
  Device device;
  DType dtype = DType::f32;
  int repeats = 5, warmup = 2, limit = 0;
  bool benchmark = false, deterministic = false, tf32 = false;
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr, "bench_conv: %s\nusage: bench_conv [--set resnet50|efficientnet_b0|all|none] [--batch 32,256] "
               "[--shapes FILE] [--device cpu|cuda[:N]] [--dtype f32|f16|bf16] [--repeats R] [--warmup W] [--benchmark] [--deterministic] [--tf32] "
               "[--cpu-convolutions onednn|reference] [--json OUT] [--limit K]\n", problem.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--benchmark" || flag == "--deterministic" || flag == "--tf32") {
      (flag == "--benchmark" ? o.benchmark : flag == "--deterministic" ? o.deterministic : o.tf32) = true;
      continue;
    }
    if (flag == "--help" || flag == "-h") usage("times convolutions");
    if (i + 1 >= argc) usage("missing value after " + flag);
    const std::string v = argv[++i];
    try {
      if (flag == "--set") o.set = v;
      else if (flag == "--shapes") o.shapes_file = v;
      else if (flag == "--json") o.json = v;
      else if (flag == "--device") o.device = Device::parse(v);
      else if (flag == "--dtype") o.dtype = parse_dtype(v);
      else if (flag == "--repeats") o.repeats = std::stoi(v);
      else if (flag == "--warmup") o.warmup = std::stoi(v);
      else if (flag == "--limit") o.limit = std::stoi(v);
      else if (flag == "--cpu-convolutions") o.cpu_convolutions = parse_cpu_convolutions(v);
      else if (flag == "--batch") {
        std::istringstream list(v);
        std::string item;
        while (std::getline(list, item, ',')) o.batches.push_back(std::stoll(item));
      } else usage("unknown option " + flag);
    } catch (const std::logic_error&) {
      usage("bad value '" + v + "' for " + flag);
    }
  }
  if (o.batches.empty()) o.batches = o.device.is_cuda() ? std::vector<int64_t>{32, 256} : std::vector<int64_t>{1};
  if (o.repeats < 1) usage("--repeats must be at least 1");
  return o;
}
}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  try {
    std::vector<ConvShape> shapes;
    if (opt.set == "resnet50" || opt.set == "all") for (auto& s : resnet50_shapes()) shapes.push_back(s);
    if (opt.set == "efficientnet_b0" || opt.set == "all")
      for (auto& s : efficientnet_b0_shapes()) {
        s.name = "effb0." + s.name;
        shapes.push_back(s);
      }
    if (!opt.shapes_file.empty()) for (auto& s : read_shapes(opt.shapes_file)) shapes.push_back(s);
    if (opt.limit > 0 && static_cast<int>(shapes.size()) > opt.limit) shapes.resize(static_cast<size_t>(opt.limit));
    CNN_CHECK(!shapes.empty(), "bench_conv: no shapes (use --set or --shapes)");
    cuda::set_cudnn_benchmark(opt.benchmark);
    cuda::set_cudnn_deterministic(opt.deterministic);
    cuda::set_allow_tf32(opt.tf32);
    set_cpu_convolutions(opt.cpu_convolutions);
    const bool on_gpu = opt.device.is_cuda();
    const auto sync = [&] {
      if (on_gpu) cuda::synchronize(opt.device.index);
    };

    nlohmann::json results = nlohmann::json::array();
    const std::string choice = std::string(opt.benchmark ? "measured" : "heuristic") + (opt.deterministic ? ", deterministic" : "") +
                             (opt.dtype == DType::f32 ? (opt.tf32 ? ", TF32 allowed" : ", FMA math (no TF32)") : "");
    std::printf("device %s, dtype %s, %s algorithm choice%s\n", opt.device.str().c_str(), dtype_name(opt.dtype), choice.c_str(),
                on_gpu ? "" : (std::string(", CPU convolutions: ") + cpu_convolutions_name(opt.cpu_convolutions)).c_str());
    std::printf("%-28s %5s %9s %9s %9s %8s %8s %8s  %s\n", "layer", "batch", "fwd ms", "bwd-d ms", "bwd-f ms", "fwd TF/s",
                "bwd-d TF", "bwd-f TF", on_gpu ? "algorithms (fwd/bwd-d/bwd-f), workspace MiB"
                : opt.cpu_convolutions == CpuConvolutions::onednn ? "implementations (fwd/bwd-d/bwd-f)"
                                                                : "GEMM share, GEMM GFLOP/s");
    for (int64_t batch : opt.batches) {
      for (const ConvShape& s : shapes) {
        const ConvGeometry g = geometry(s, batch);
        const Tensor x = Tensor::uniform({g.n, g.h, g.w, g.c}, -1, 1, 1, opt.dtype, opt.device);
        const Tensor w = Tensor::uniform({g.o, g.kh, g.kw, g.group_in()}, -0.1, 0.1, 2, opt.dtype, opt.device);
        const Tensor dy = Tensor::uniform({g.n, g.oh, g.ow, g.o}, -1, 1, 3, opt.dtype, opt.device);
        Tensor y = Tensor::empty(dy.shape(), opt.dtype, opt.device), dx = Tensor::empty(x.shape(), opt.dtype, opt.device);
        Tensor dw = Tensor::empty(w.shape(), opt.dtype, opt.device);
        const double flops = 2.0 * g.n * g.oh * g.ow * g.o * g.kh * g.kw * g.group_in();
        double t_fwd = 0, t_bd = 0, t_bf = 0;
        nlohmann::json row = {{"layer", s.name}, {"batch", batch}, {"count", s.count}, {"n", g.n}, {"h", g.h}, {"w", g.w},
                              {"c", g.c}, {"o", g.o}, {"kh", g.kh}, {"kw", g.kw}, {"stride", s.stride}, {"pad", s.pad},
                              {"groups", s.groups}, {"flops", flops}};
        std::string extra;
        if (on_gpu) {
#if CNN_WITH_CUDA
          // Through the engine's cuDNN path (ranking, walk-down, workspace from the caching allocator),
          // as training runs it; the first run of each direction makes its plan (and measures, in
          // benchmark mode), which the warm-up absorbs.
          using cudnn_conv::ConvDirection;
          const Device& dev = opt.device;
          t_fwd = median_seconds([&] { cudnn_conv::run(ConvDirection::forward, opt.dtype, g, dev, x.data(), w.data(), y.data()); },
                                 sync, std::max(opt.warmup, 1), opt.repeats);
          t_bd = median_seconds([&] { cudnn_conv::run(ConvDirection::backward_data, opt.dtype, g, dev, dy.data(), w.data(), dx.data()); },
                                sync, std::max(opt.warmup, 1), opt.repeats);
          t_bf = median_seconds([&] { cudnn_conv::run(ConvDirection::backward_filter, opt.dtype, g, dev, x.data(), dy.data(), dw.data()); },
                                sync, std::max(opt.warmup, 1), opt.repeats);
          size_t ws_max = 0;
          std::string algos;
          for (auto d : {ConvDirection::forward, ConvDirection::backward_data, ConvDirection::backward_filter}) {
            ws_max = std::max(ws_max, cudnn_conv::workspace_bytes(d, opt.dtype, g, dev));
            if (!algos.empty()) algos += '/';
            algos += cudnn_conv::algorithm(d, opt.dtype, g, dev);
          }
          char buf[160];
          std::snprintf(buf, sizeof buf, "%s, %.1f", algos.c_str(), ws_max / 1048576.0);
          extra = buf;
          row["algorithms"] = algos;
          row["workspace_bytes"] = ws_max;
#endif
        } else {
          // As the conv2d op runs them: oneDNN or the reference ([train] cpu_convolutions).
          using kernels::ConvDirection;
          t_fwd = median_seconds([&] { run_cpu_convolution(ConvDirection::forward, opt.dtype, g, x.data(), w.data(), y.data()); },
                                 sync, opt.warmup, opt.repeats);
          t_bd = median_seconds([&] { run_cpu_convolution(ConvDirection::backward_data, opt.dtype, g, dy.data(), w.data(), dx.data()); },
                                sync, opt.warmup, opt.repeats);
          t_bf = median_seconds([&] { run_cpu_convolution(ConvDirection::backward_filter, opt.dtype, g, x.data(), dy.data(), dw.data()); },
                                sync, opt.warmup, opt.repeats);
          std::string implementations;
          for (auto d : {ConvDirection::forward, ConvDirection::backward_data, ConvDirection::backward_filter}) {
            if (!implementations.empty()) implementations += '/';
            implementations += cpu_convolution_implementation(d, opt.dtype, g);
          }
          row["implementations"] = implementations;
          if (opt.cpu_convolutions == CpuConvolutions::onednn) {
            extra = implementations;
          } else if (g.group_in() > 1 || g.groups == 1) {
            // The forward's GEMMs alone, on a ready column matrix: [N*OH*OW, K] x [Og, K]^T per group.
            const int64_t k = g.kh * g.kw * g.group_in(), rows = g.n * g.oh * g.ow, og = g.group_out();
            const Tensor col = Tensor::uniform({rows, k}, -1, 1, 4, opt.dtype);
            const double t_gemm = median_seconds(
                [&] {
                  for (int64_t grp = 0; grp < g.groups; ++grp) {
                    kernels::GemmShape gs{false, true, rows, og, k, k, k, g.o};
                    kernels::cpu::gemm(opt.dtype, gs, 1.0, col.data(),
                                       static_cast<const char*>(w.data()) + grp * og * k * dtype_size(opt.dtype), 0.0,
                                       static_cast<char*>(y.data()) + grp * og * dtype_size(opt.dtype));
                  }
                },
                sync, opt.warmup, opt.repeats);
            char buf[80];
            std::snprintf(buf, sizeof buf, "%.0f%%, %.1f", 100.0 * t_gemm / t_fwd, flops / t_gemm / 1e9);
            extra = buf;
            row["gemm_seconds"] = t_gemm;
            row["gemm_share"] = t_gemm / t_fwd;
          } else {
            extra = "direct depthwise loop";
          }
        }
        row["forward_seconds"] = t_fwd;
        row["backward_data_seconds"] = t_bd;
        row["backward_filter_seconds"] = t_bf;
        results.push_back(row);
        std::printf("%-28s %5lld %9.3f %9.3f %9.3f %8.2f %8.2f %8.2f  %s\n", s.name.c_str(), static_cast<long long>(batch),
                    t_fwd * 1e3, t_bd * 1e3, t_bf * 1e3, flops / t_fwd / 1e12, flops / t_bd / 1e12, flops / t_bf / 1e12,
                    extra.c_str());
        std::fflush(stdout);
      }
    }
    nlohmann::json doc = {{"benchmark", "bench_conv"}, {"device", opt.device.str()}, {"dtype", dtype_name(opt.dtype)},
                          {"algorithm_choice", choice}, {"results", results}};
    std::ofstream(opt.json) << doc.dump(2) << "\n";
    std::printf("wrote %s\n", opt.json.c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_conv: %s\n", e.what());
    return 1;
  }
  return 0;
}
