// bf16 matrix products on the CPU through oneDNN's matmul (kernels/cpu/gemm_onednn.cpp), built when
// CMake finds oneDNN: the bf16 GEMMs of Linear layers on AMX tiles or AVX-512 BF16 dot products
// where the CPU has them, instead of widening the operands to float for OpenBLAS.
#pragma once
#include "kernels/common/dtype.h"
#include "kernels/gemm.h"

namespace cnn::kernels::cpu {

// C = A B + beta C (row-major, the transposes and leading dimensions of GemmShape) and returns
// true; or returns false and touches nothing where it declines: a dtype other than bf16, alpha other
// than 1, beta other than 0 or 1, or a shape oneDNN has only its reference loops for. As the
// widening path: products exact in f32, summed in f32 (with the old C when beta is 1), rounded once.
bool onednn_gemm(DType dt, const GemmShape& s, double alpha, const void* a, const void* b, double beta, void* c);

}  // namespace cnn::kernels::cpu
