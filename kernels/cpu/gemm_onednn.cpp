// bf16 GEMMs through oneDNN's matmul primitive. One primitive per (shape, transposes, leading
// dimensions, beta, thread count), made on first use and kept; the operands are our row-major
// buffers seen through strides (a transposed one with its strides swapped), so nothing is copied.
// beta = 1 is the matmul's sum post-op: the old C is read, widened, added to the f32 sum and the
// result rounded to bf16 once, as the widening path does. oneDNN runs these with brgemm kernels on
// AMX where present: compact_cnn's Linear layers (256 x 3136 x 128) in bf16 took about 0.1-0.2 ms
// instead of 0.8 for widening to float and OpenBLAS's sgemm.
#include "kernels/cpu/gemm_onednn.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <array>
#include <memory>
#include <string>

#include "kernels/common/error.h"
#include "kernels/cpu/onednn_context.h"

namespace cnn::kernels::cpu {

namespace {
using dnnl::memory;

struct Key {
  std::array<int64_t, 9> shape;  // trans_a, trans_b, m, n, k, lda, ldb, ldc, beta
  int threads;
  auto operator<=>(const Key&) const = default;
};

// A row-major [rows, cols] operand with leading dimension ld, or its transpose when stored
// transposed ([cols, rows] in memory).
memory::desc operand(int64_t rows, int64_t cols, int64_t ld, bool transposed) {
  return memory::desc({rows, cols}, memory::data_type::bf16,
                      transposed ? memory::dims{1, ld} : memory::dims{ld, 1});
}

struct Prepared {
  bool usable = false;
  dnnl::primitive primitive;
  memory::desc a, b, c, scratchpad;
};

std::unique_ptr<Prepared> prepare(const GemmShape& s, bool accumulate) {
  auto p = std::make_unique<Prepared>();
  p->a = operand(s.m, s.k, s.lda, s.trans_a);
  p->b = operand(s.k, s.n, s.ldb, s.trans_b);
  p->c = operand(s.m, s.n, s.ldc, false);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  try {
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(p->a, p->b, p->c), attr, onednn::engine());
    if (onednn::is_reference(pd.impl_info_str())) return p;  // slower than widening
    p->primitive = dnnl::primitive(pd);
    p->scratchpad = pd.scratchpad_desc();
    p->usable = true;
  } catch (const dnnl::error&) {
    // no primitive for this shape: declined, the widening path runs
  }
  return p;
}

const Prepared& prepared(const GemmShape& s, bool accumulate) {
  const Key key{{s.trans_a, s.trans_b, s.m, s.n, s.k, s.lda, s.ldb, s.ldc, accumulate}, onednn::threads()};
  return onednn::cached<Key, Prepared>(key, [&] { return prepare(s, accumulate); });
}
}  // namespace

bool onednn_gemm(DType dt, const GemmShape& s, double alpha, const void* a, const void* b, double beta, void* c) {
  if (dt != DType::bf16 || alpha != 1.0 || (beta != 0.0 && beta != 1.0) || s.k == 0) return false;
  const Prepared& p = prepared(s, beta == 1.0);
  if (!p.usable) return false;
  dnnl::engine& engine = onednn::engine();
  dnnl::stream stream(engine);
  try {
    p.primitive.execute(
        stream, {{DNNL_ARG_SRC, memory(p.a, engine, const_cast<void*>(a))},
                 {DNNL_ARG_WEIGHTS, memory(p.b, engine, const_cast<void*>(b))},
                 {DNNL_ARG_DST, memory(p.c, engine, c)},
                 {DNNL_ARG_SCRATCHPAD,
                  memory(p.scratchpad, engine,
                         onednn::thread_buffer(onednn::Buffer::scratchpad, p.scratchpad.get_size()))}});
    stream.wait();
  } catch (const dnnl::error& e) {
    CNN_FAIL("oneDNN bf16 matrix product (", s.m, " x ", s.k, " x ", s.n, ") failed: ", e.what());
  }
  return true;
}

}  // namespace cnn::kernels::cpu
