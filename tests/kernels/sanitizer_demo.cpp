// Runs one of the broken kernels of broken_kernels.cpp under the host emulation; the sanitizer
// build's test passes when the sanitizer's report appears in the output.
#include <cstdio>
#include <cstring>

namespace cnn::kernels::cuda::broken {
float run_race();
void run_overflow();
}  // namespace cnn::kernels::cuda::broken

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "race") == 0) {
    std::printf("sum without barrier: %g\n", cnn::kernels::cuda::broken::run_race());
    return 0;
  }
  if (argc == 2 && std::strcmp(argv[1], "overflow") == 0) {
    cnn::kernels::cuda::broken::run_overflow();
    return 0;
  }
  std::fprintf(stderr, "usage: emulation_sanitizer_demo race|overflow\n");
  return 2;
}
