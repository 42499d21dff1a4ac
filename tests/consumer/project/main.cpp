// Uses the installed engine: wraps caller-owned memory, runs ops with the tape, checks a gradient.
#include <cnn.h>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  std::vector<float> host = {1.0f, -2.0f, 3.0f, -4.0f};
  cnn::Tensor x = cnn::Tensor::from_blob(host.data(), {2, 2}, cnn::DType::f32);
  cnn::Tensor w = cnn::Tensor::ones({3, 2}).requires_grad_();
  cnn::Tape tape;
  cnn::Tensor loss;
  {
    cnn::Tape::Recording rec(tape);
    loss = cnn::sum(cnn::relu(cnn::linear(x, w)));
  }
  tape.backward(loss);
  // Each row of x sums to -1, so every output of linear is -1 and relu makes the loss 0.
  const double value = loss.item();
  std::printf("consumer: cnn %s, cuda %s, loss %g\n", CNN_VERSION, cnn::cuda::is_available() ? "yes" : "no", value);
  cnn::Tensor y = cnn::Tensor::from_vector<float>({1, 2}, {1, 2}).requires_grad_();
  cnn::Tape tape2;
  {
    cnn::Tape::Recording rec(tape2);
    loss = cnn::sum(cnn::linear(y, w));
  }
  tape2.backward(loss);
  const std::vector<double> g = y.grad().to_doubles();  // d/dy sum(y W^T) = column sums of W = [3, 3]
  if (value != 0.0 || std::fabs(g[0] - 3.0) > 1e-6 || std::fabs(g[1] - 3.0) > 1e-6) {
    std::printf("consumer: unexpected results\n");
    return 1;
  }
  std::printf("consumer: ok\n");
  return 0;
}
