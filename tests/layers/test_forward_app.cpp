// cnn_forward end to end: weights written in torchvision's layout and an NCHW input in safetensors
// files go in; the logits it writes equal the model's own forward pass on the same weights.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "engine/io/safetensors.h"
#include "engine/tape.h"
#include "layers/registry.h"
#include "layers/weights.h"

using namespace cnn;

#ifdef CNN_FORWARD_PROGRAM
TEST_CASE("cnn_forward reproduces the model's logits from safetensors weights and an NCHW input") {
  const auto dir = std::filesystem::temp_directory_path() / ("cnn_forward_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto model = make_model("cifar_resnet20", 10, 3, 11);
  save_weights(*model, dir / "weights.safetensors");
  const Tensor input = Tensor::uniform({2, 3, 32, 32}, -1, 1, 12);  // NCHW, as PyTorch writes it
  io::save_safetensors(dir / "input.safetensors", {{"input", input}});
  const std::string command = std::string(CNN_FORWARD_PROGRAM) + " --model cifar_resnet20 --classes 10 --weights " +
                              (dir / "weights.safetensors").string() + " --input " + (dir / "input.safetensors").string() +
                              " --output " + (dir / "output.safetensors").string() + " 2>/dev/null";
  REQUIRE(std::system(command.c_str()) == 0);
  const Tensor output = io::load_safetensors(dir / "output.safetensors").tensor("output");
  Tensor expected;
  {
    NoGrad no_grad;
    model->eval();
    expected = model->forward(nchw_to_nhwc(input));
  }
  CHECK(output.shape() == Shape{2, 10});
  CHECK(output.to_doubles() == expected.to_doubles());
  std::filesystem::remove_all(dir);
}
#endif

TEST_CASE("cnn_forward: a bad number on the command line gets a readable message") {
  const std::string out = (std::filesystem::temp_directory_path() / ("cnn_forward_cli_" + std::to_string(::getpid()))).string();
  const std::string command = std::string(CNN_FORWARD_PROGRAM) + " --model cifar_resnet20 --classes 0 --weights x --input x --output x > " +
                              out + " 2>&1";
  CHECK(std::system(command.c_str()) != 0);
  std::ifstream file(out);
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::filesystem::remove(out);
  CHECK(text.find("--classes: must be a whole number >= 1, got 0") != std::string::npos);
  CHECK(text.size() < 300);  // not CLI11's range up to the largest double
}
