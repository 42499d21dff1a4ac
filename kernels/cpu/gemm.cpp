// CPU GEMM through OpenBLAS. f32 and f64 call sgemm/dgemm directly; f16 and bf16 are widened to
// float copies, multiplied with sgemm (float accumulation, as on the GPU) and rounded back. In a
// build with oneDNN, bf16 goes to its matmul first (kernels/cpu/gemm_onednn.h: the same arithmetic
// on the CPU's bf16 instructions), and the widening path runs what it declines.
#include "kernels/gemm.h"

#include <cblas.h>

#include <vector>

#include "kernels/common/dispatch.h"
#include "kernels/common/half.h"
#if defined(CNN_KERNELS_WITH_ONEDNN)
#include "kernels/cpu/gemm_onednn.h"
#endif

namespace cnn::kernels::cpu {

namespace {
template <class T>
std::vector<float> widen(const void* p, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  const T* src = static_cast<const T*>(p);
  for (int64_t i = 0; i < n; ++i) out[i] = to_compute(src[i]);
  return out;
}

template <class T>
void gemm_16bit(const GemmShape& s, double alpha, const void* a, const void* b, double beta, void* c) {
  // Extent of each operand in elements: up to the last element of its last row.
  const int64_t a_rows = s.trans_a ? s.k : s.m, a_cols = s.trans_a ? s.m : s.k;
  const int64_t b_rows = s.trans_b ? s.n : s.k, b_cols = s.trans_b ? s.k : s.n;
  std::vector<float> fa = widen<T>(a, (a_rows - 1) * s.lda + a_cols), fb = widen<T>(b, (b_rows - 1) * s.ldb + b_cols);
  std::vector<float> fc = widen<T>(c, (s.m - 1) * s.ldc + s.n);
  cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans, s.trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(s.m), static_cast<int>(s.n), static_cast<int>(s.k), static_cast<float>(alpha),
              fa.data(), static_cast<int>(s.lda), fb.data(), static_cast<int>(s.ldb), static_cast<float>(beta),
              fc.data(), static_cast<int>(s.ldc));
  T* dst = static_cast<T*>(c);
  for (int64_t r = 0; r < s.m; ++r)
    for (int64_t j = 0; j < s.n; ++j) dst[r * s.ldc + j] = from_compute<T>(fc[r * s.ldc + j]);
}
}  // namespace

void gemm(DType dt, const GemmShape& s, double alpha, const void* a, const void* b, double beta, void* c,
          void* /*cublas_handle*/, void* /*workspace*/, size_t, bool /*allow_tf32*/, Stream) {
  if (s.m == 0 || s.n == 0) return;
#if defined(CNN_KERNELS_WITH_ONEDNN)
  if (onednn_gemm(dt, s, alpha, a, b, beta, c)) return;
#endif
  const auto ta = s.trans_a ? CblasTrans : CblasNoTrans, tb = s.trans_b ? CblasTrans : CblasNoTrans;
  const int m = static_cast<int>(s.m), n = static_cast<int>(s.n), k = static_cast<int>(s.k);
  switch (dt) {
    case DType::f32:
      cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, static_cast<float>(alpha), static_cast<const float*>(a),
                  static_cast<int>(s.lda), static_cast<const float*>(b), static_cast<int>(s.ldb),
                  static_cast<float>(beta), static_cast<float*>(c), static_cast<int>(s.ldc));
      return;
    case DType::f64:
      cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, static_cast<const double*>(a), static_cast<int>(s.lda),
                  static_cast<const double*>(b), static_cast<int>(s.ldb), beta, static_cast<double*>(c),
                  static_cast<int>(s.ldc));
      return;
    case DType::f16: gemm_16bit<half>(s, alpha, a, b, beta, c); return;
    case DType::bf16: gemm_16bit<bfloat16>(s, alpha, a, b, beta, c); return;
    default: fail_not_floating("gemm", dt);
  }
}

}  // namespace cnn::kernels::cpu
