// The number of threads the CPU backend's parallel loops (and OpenBLAS, which shares their OpenMP
// pool) use. Without OpenMP (CNN_OPENMP=OFF) the CPU backend runs on one thread and setting a
// count has no effect.
#pragma once

namespace cnn {

// Threads for the following CPU kernels; count <= 0 keeps the current setting.
void set_cpu_threads(int count);
int cpu_threads();

}  // namespace cnn
