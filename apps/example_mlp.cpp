// cnn_example_mlp: trains a two-layer MLP on Fashion-MNIST with the engine's ops and tape, and
// prints the falling loss and the test accuracy. A library example: the whole training loop written
// against the engine directly (tensors, ops, the Tape, a hand-written SGD step with momentum) and
// data/'s IDX reader, without train/'s trainer or a config (cnn_train is for training runs).
//
//   cnn_example_mlp [--data DIR] [--epochs N] [--device cpu|cuda[:N]] [--hidden H] [--batch B] [--lr LR]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "data/idx.h"
#include "engine/cnn.h"

using namespace cnn;

namespace {
struct Options {
  std::string data = "/usr/share/datasets/fashion-mnist";
  int epochs = 5;
  int hidden = 256;
  int batch = 128;
  double lr = 0.05;
  double momentum = 0.9;
  Device device;
};

[[noreturn]] void usage(const char* problem) {
  std::fprintf(stderr,
               "cnn_example_mlp: %s\nusage: cnn_example_mlp [--data DIR] [--epochs N] [--device cpu|cuda[:N]] "
               "[--hidden H] [--batch B] [--lr LR]\n",
               problem);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") usage("trains an MLP on Fashion-MNIST");
    if (i + 1 >= argc) usage(("missing value after " + flag).c_str());
    const std::string value = argv[++i];
    try {
      if (flag == "--data") o.data = value;
      else if (flag == "--epochs") o.epochs = std::stoi(value);
      else if (flag == "--hidden") o.hidden = std::stoi(value);
      else if (flag == "--batch") o.batch = std::stoi(value);
      else if (flag == "--lr") o.lr = std::stod(value);
      else if (flag == "--device") o.device = Device::parse(value);
      else usage(("unknown option " + flag).c_str());
    } catch (const std::logic_error&) {  // std::stoi and std::stod
      usage(("bad value '" + value + "' for " + flag).c_str());
    } catch (const Error& e) {  // Device::parse
      usage(e.what());
    }
  }
  if (o.epochs < 1 || o.hidden < 1 || o.batch < 1 || !(o.lr > 0)) usage("epochs, hidden, batch and lr must be positive");
  return o;
}

// Images [N, 28, 28] u8 -> [N, 784] f32 in [0, 1]; labels [N] u8 -> i64.
std::pair<Tensor, Tensor> load(const std::string& dir, const std::string& prefix) {
  const Tensor images = data::read_idx(dir + "/" + prefix + "-images-idx3-ubyte.gz");
  const Tensor labels = data::read_idx(dir + "/" + prefix + "-labels-idx1-ubyte.gz");
  CNN_CHECK(images.size(0) == labels.size(0), "Fashion-MNIST ", prefix, ": ", images.size(0), " images but ",
            labels.size(0), " labels");
  const Tensor x = scale(images.to(DType::f32), 1.0 / 255.0).reshape({images.size(0), -1});
  return {x, labels.to(DType::i64)};
}

double accuracy(const Tensor& x, const Tensor& y, const std::vector<Tensor>& p, const Device& device) {
  NoGrad no_grad;
  int64_t correct = 0;
  for (int64_t begin = 0; begin < x.size(0); begin += 1000) {
    const int64_t end = std::min<int64_t>(begin + 1000, x.size(0));
    const Tensor logits = linear(relu(linear(x.slice(begin, end).to(device), p[0], p[1])), p[2], p[3]);
    const std::vector<double> predicted = max_last(logits).second.to_doubles();
    const std::vector<double> truth = y.slice(begin, end).to_doubles();
    for (size_t i = 0; i < predicted.size(); ++i) correct += predicted[i] == truth[i];
  }
  return 100.0 * static_cast<double>(correct) / static_cast<double>(x.size(0));
}
}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    const auto [train_x, train_y] = load(o.data, "train");
    const auto [test_x, test_y] = load(o.data, "t10k");
    std::printf("Fashion-MNIST: %lld training and %lld test images from %s; MLP 784-%d-10 on %s\n",
                static_cast<long long>(train_x.size(0)), static_cast<long long>(test_x.size(0)), o.data.c_str(),
                o.hidden, o.device.str().c_str());

    // Kaiming-uniform-like initialisation, as torch.nn.Linear does: U(-1/sqrt(in), 1/sqrt(in)).
    const double b1 = 1.0 / std::sqrt(784.0), b2 = 1.0 / std::sqrt(static_cast<double>(o.hidden));
    std::vector<Tensor> params = {Tensor::uniform({o.hidden, 784}, -b1, b1, 1, DType::f32, o.device),
                                  Tensor::uniform({o.hidden}, -b1, b1, 2, DType::f32, o.device),
                                  Tensor::uniform({10, o.hidden}, -b2, b2, 3, DType::f32, o.device),
                                  Tensor::uniform({10}, -b2, b2, 4, DType::f32, o.device)};
    std::vector<Tensor> velocity;
    for (Tensor& p : params) {
      p.requires_grad_();
      velocity.push_back(Tensor::zeros(p.shape(), p.dtype(), p.device()));
    }

    const int64_t n = train_x.size(0), steps_per_epoch = n / o.batch;
    const auto start = std::chrono::steady_clock::now();
    for (int epoch = 1; epoch <= o.epochs; ++epoch) {
      // A per-epoch permutation from the Philox generator keeps runs reproducible.
      const std::vector<double> keys = Tensor::uniform({n}, 0, 1, 1000 + epoch, DType::f64).to_doubles();
      std::vector<int64_t> order(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
      std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return keys[a] < keys[b]; });

      double running = 0;
      for (int64_t step = 0; step < steps_per_epoch; ++step) {
        Tensor xb = Tensor::empty({o.batch, 784});
        std::vector<int64_t> yb(static_cast<size_t>(o.batch));
        const float* xs = train_x.data_as<float>();
        const int64_t* ys = train_y.data_as<int64_t>();
        for (int64_t i = 0; i < o.batch; ++i) {
          const int64_t src = order[static_cast<size_t>(step * o.batch + i)];
          std::memcpy(xb.data_as<float>() + i * 784, xs + src * 784, 784 * sizeof(float));
          yb[static_cast<size_t>(i)] = ys[src];
        }
        const Tensor x = xb.to(o.device), y = Tensor::from_vector(yb, {o.batch}).to(o.device);
        Tape tape;
        Tensor loss;
        {
          Tape::Recording rec(tape);
          loss = cross_entropy(linear(relu(linear(x, params[0], params[1])), params[2], params[3]), y);
        }
        tape.backward(loss);
        {
          NoGrad no_grad;  // SGD with momentum: v = m v + g; p -= lr v
          for (size_t i = 0; i < params.size(); ++i) {
            velocity[i] = add(scale(velocity[i], o.momentum), params[i].grad());
            add_(params[i], scale(velocity[i], -o.lr));
            params[i].zero_grad();
          }
        }
        running += loss.item();
        if ((step + 1) % 100 == 0) {
          std::printf("epoch %d step %4lld/%lld  loss %.4f\n", epoch, static_cast<long long>(step + 1),
                      static_cast<long long>(steps_per_epoch), running / 100);
          std::fflush(stdout);
          running = 0;
        }
      }
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("epoch %d: test top-1 %.2f%%  (%.1f s elapsed)\n", epoch, accuracy(test_x, test_y, params, o.device),
                  seconds);
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cnn_example_mlp: %s\n", e.what());
    if (std::strstr(e.what(), "cannot open IDX file"))
      std::fprintf(stderr, "Fashion-MNIST is shipped by Debian's dataset-fashion-mnist package "
                           "(apt-get install dataset-fashion-mnist), or pass --data DIR.\n");
    return 1;
  }
  return 0;
}
