// Separable antialiased bilinear resampling: per axis a table of taps (first input index, tap count
// and normalised weights) for every output index, then two passes in float.
//
// Every output value is the result of the same float operations, in the same order, as the plain
// loops "sum = 0; for each tap in increasing input order: sum += weight * input", then rounding
// half to even: no reassociation, and separate multiplies and adds (the x86-64 baseline the library
// is built for has no fused multiply-add; a build for an FMA target lets the compiler contract
// them, which changes last bits). Zero-weight taps may be skipped or added, which changes nothing:
// inputs and weights are non-negative, so a sum is never -0, and adding +0 keeps it. The speed
// comes from the arrangement alone:
//   - the weights are computed once per axis and call, trimmed of zeros at either end, stored
//     contiguously per output index and broadcast to four lanes in advance;
//   - the horizontal pass converts a source row to float once (a loop the compiler vectorises)
//     and computes all channels of an output pixel at once with four-lane operations: one tap is
//     one 4-wide multiply and add (lanes past the channels carry the next pixel and are discarded).
//     Every pixel of a call takes the same number of taps, padded with zero weights, so the tap
//     loop has a fixed length and is unrolled;
//   - each source row the vertical pass needs is filtered once, into a ring of a few rows that
//     stays in the first-level cache until the vertical pass has used it;
//   - the vertical pass keeps a 32-value block of an output row in registers across its taps and
//     rounds to bytes with cvtps2dq and saturating packs (SSE2) instead of a libm call per value;
//   - the scratch buffers belong to the calling thread and are reused from call to call.
// The four-lane type is a GCC/Clang vector (SSE2 on any x86-64, NEON on ARM); other compilers get
// a plain struct with the same lane-by-lane arithmetic.
//
// One pass takes ratios below kMaxScale (the taps of an output index fit kMaxTaps). Beyond that an
// axis is first box-reduced by the smallest integer factor k that brings it below (box_reduce.h,
// PIL's reducing_gap idea), and the filter then runs on the reduced image with its box in reduced,
// fractional coordinates. That is close to exact: a reduced pixel is the mean of k inputs, and the
// mean of a linear function over a block is its value at the block's centre, so the two steps give
// each input the exact triangle weight except in the few blocks that hold the triangle's apex or
// ends (and a block cut short by the image's edge). tests/data/test_resample.cpp measures it.
#include "data/resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "data/box_reduce.h"
#include "engine/error.h"

namespace cnn::data {

namespace {
// Four floats operated on lane by lane.
#if defined(__GNUC__)
using F4 = float __attribute__((vector_size(16)));
#else
struct F4 {
  float lane[4];
  float& operator[](int i) { return lane[i]; }
  float operator[](int i) const { return lane[i]; }
  F4& operator+=(const F4& o) {
    for (int i = 0; i < 4; ++i) lane[i] += o.lane[i];
    return *this;
  }
  friend F4 operator*(const F4& a, const F4& b) {
    F4 r;
    for (int i = 0; i < 4; ++i) r.lane[i] = a.lane[i] * b.lane[i];
    return r;
  }
};
#endif

// Unaligned loads and stores of four consecutive floats.
F4 load4(const float* p) {
  F4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
void store4(float* p, const F4& v) { std::memcpy(p, &v, sizeof v); }

// One pass shrinks by less than kMaxScale along each axis: taps per output index are then at most
// 2 ceil(radius) + 1 <= 61 with the radius (the scale) below 30.
constexpr int kMaxScale = 30;
constexpr int kMaxTaps = 64;

// The smallest box-reduction factor that leaves an axis of `size` inputs to `out` outputs within
// one pass (size / (k out) < kMaxScale); 1 when it already is.
int reduction_factor(int size, int out) {
  const int64_t limit = static_cast<int64_t>(kMaxScale) * out;
  return size < limit ? 1 : static_cast<int>(size / limit + 1);
}

struct Taps {
  int stride = 0;              // weights stored per output index (the filter's width)
  std::vector<int> first;      // first input index of each output index
  std::vector<int> count;      // taps used from `first` on (zero weights at either end trimmed)
  std::vector<float> weights;  // [out][stride][4]: each weight repeated in four lanes, 0 past `count`
  int most = 0;                // the largest count
  int lo = 0, hi = 0;          // the input indices with a non-zero weight: [lo, hi)
  int reach = 0;               // max(first + most): taking `most` taps everywhere reads [lo, reach)

  const float* weights_of(int i) const { return &weights[static_cast<size_t>(i) * stride * 4]; }
};

// Output i covers input [start + i * scale, start + (i + 1) * scale) with scale = size / out; its
// centre is start + (i + 0.5) * scale and the filter radius is max(scale, 1). start and size are
// whole pixels except on a box-reduced axis, where the last input may stand for a block cut short
// by the image's edge: it then covers [in_size - 1, in_size - 1 + last_extent) and weighs the
// triangle at the centre of that, times its extent.
Taps make_taps(int in_size, double start, double size, int out, double last_extent = 1) {
  const double scale = size / out;
  const double radius = std::max(scale, 1.0);
  Taps t;
  t.stride = static_cast<int>(std::ceil(radius)) * 2 + 1;
  t.first.resize(static_cast<size_t>(out));
  t.count.resize(static_cast<size_t>(out));
  t.weights.assign(static_cast<size_t>(out) * t.stride * 4, 0.0f);
  t.lo = in_size;
  t.hi = 0;
  for (int i = 0; i < out; ++i) {
    const double center = start + (i + 0.5) * scale;
    const int lo = std::max(static_cast<int>(std::floor(center - radius)), 0);
    const int hi = std::min(static_cast<int>(std::ceil(center + radius)), in_size);  // exclusive
    double weights[kMaxTaps];
    double total = 0;
    int count = 0;
    for (int j = lo; j < hi && count < t.stride; ++j, ++count) {
      double w = std::max(0.0, 1.0 - std::fabs(j + 0.5 - center) / radius);
      if (j == in_size - 1 && last_extent < 1)
        w = last_extent * std::max(0.0, 1.0 - std::fabs(j + 0.5 * last_extent - center) / radius);
      weights[count] = w;
      total += w;
    }
    float normalised[kMaxTaps];
    for (int k = 0; k < count; ++k) normalised[k] = static_cast<float>(total > 0 ? weights[k] / total : 0.0);
    int begin = 0, end = count;
    while (begin < end && normalised[begin] == 0.0f) ++begin;
    while (end > begin && normalised[end - 1] == 0.0f) --end;
    t.first[static_cast<size_t>(i)] = lo + begin;
    t.count[static_cast<size_t>(i)] = end - begin;
    float* w = &t.weights[static_cast<size_t>(i) * t.stride * 4];
    for (int k = begin; k < end; ++k) std::fill_n(w + 4 * (k - begin), 4, normalised[k]);
    if (end > begin) {
      t.lo = std::min(t.lo, lo + begin);
      t.hi = std::max(t.hi, lo + end);
    }
    t.most = std::max(t.most, end - begin);
  }
  if (t.lo >= t.hi) t.lo = t.hi = 0;
  for (int i = 0; i < out; ++i) t.reach = std::max(t.reach, t.first[static_cast<size_t>(i)] + t.most);
  t.reach = std::max(t.reach, t.hi);
  return t;
}

// Lists the output indices in reverse order: resampling with the result writes the output mirrored
// left to right, with every value computed exactly as without (a fused horizontal flip).
void reverse_outputs(Taps& t) {
  std::reverse(t.first.begin(), t.first.end());
  std::reverse(t.count.begin(), t.count.end());
  const size_t block = static_cast<size_t>(t.stride) * 4;
  for (size_t a = 0, b = t.first.size(); a + 1 < b; ++a, --b)
    std::swap_ranges(t.weights.begin() + a * block, t.weights.begin() + (a + 1) * block,
                     t.weights.begin() + (b - 1) * block);
}

// nearbyint clamped to 0..255. Adding 1.5 * 2^23 to |v| < 2^22 leaves no bits below the units, so
// the sum is v rounded in the current rounding mode (to nearest, ties to even, by default) and
// subtracting again is exact; unlike std::nearbyint (a libm call on x86-64 without SSE4.1) it inlines.
// (The sums here are weighted means of bytes, far inside that range.)
uint8_t to_byte(float v) {
  const float rounded = (v + 12582912.0f) - 12582912.0f;
  return static_cast<uint8_t>(std::min(std::max(rounded, 0.0f), 255.0f));
}

// 16 values rounded and clamped to bytes as to_byte does: cvtps2dq rounds in the current rounding
// mode as nearbyint does, and the saturating packs clamp to 0..255 (the values are far inside the
// int16 range). SSE2 is part of every x86-64; elsewhere to_byte value by value.
void store_bytes16(const F4* values, uint8_t* dst) {
#if defined(__SSE2__)
  __m128 v[4];
  std::memcpy(v, values, sizeof v);
  const __m128i low = _mm_packs_epi32(_mm_cvtps_epi32(v[0]), _mm_cvtps_epi32(v[1]));
  const __m128i high = _mm_packs_epi32(_mm_cvtps_epi32(v[2]), _mm_cvtps_epi32(v[3]));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm_packus_epi16(low, high));
#else
  for (int i = 0; i < 16; ++i) dst[i] = to_byte(values[i / 4][i % 4]);
#endif
}

// Per-thread scratch, grown as needed and kept: a loader worker resamples image after image.
float* scratch(std::vector<float>& buffer, size_t size) {
  if (buffer.size() < size) buffer.resize(size);
  return buffer.data();
}

// The rows the filter reads: the 8-bit pixels of an image, or the float means of its box reduction
// (made as they are asked for).
class SourceRows {
 public:
  explicit SourceRows(const Image& image) : image_(image) {}
  SourceRows(const Image& image, const BoxReduction& reduction) : image_(image), reduction_(reduction), reduced_(true) {}
  // Pixels [first, first + count) of row y, as floats.
  void copy(int y, int first, int count, float* dst) const {
    if (reduced_) return box_reduce_row(image_, reduction_, y, first, count, dst);
    const int c = image_.channels;
    const uint8_t* src = image_.row(y) + static_cast<size_t>(first) * c;
    for (size_t j = 0, n = static_cast<size_t>(count) * c; j < n; ++j) dst[j] = src[j];
  }
  int channels() const { return image_.channels; }

 private:
  const Image& image_;
  BoxReduction reduction_;
  bool reduced_ = false;
};

// Slack after a row of `elems` floats for a four-lane store at its last pixel of >= 1 channel.
constexpr size_t kSlack = 3;

// One row of the horizontal pass: `line` holds the source row from column across.lo on, converted to
// float; dst gets out_w * c values. Four-lane loads and stores cover up to four channels of a pixel
// at once: lanes past the channels read the next pixel, and their results are overwritten by the
// next pixel's store (or land in the slack). Every pixel takes N = across.most taps, those past its
// count with weight zero, so the tap loop has a fixed length (unrolled for small N; N = 0: any).
template <int N>
void horizontal_row(const float* line, const Taps& across, int c, float* dst) {
  const int out_w = static_cast<int>(across.first.size());
  const int taps = N > 0 ? N : across.most;
  const int* first = across.first.data();
  const float* w = across.weights.data();
  const size_t w_step = static_cast<size_t>(across.stride) * 4;
  for (int x = 0; x < out_w; ++x, w += w_step) {
    const float* in = line + static_cast<size_t>(first[x] - across.lo) * c;
    F4 sum = {0, 0, 0, 0};
    for (int k = 0; k < taps; ++k) sum += load4(w + 4 * k) * load4(in + k * c);
    store4(dst + static_cast<size_t>(x) * c, sum);
  }
}

// The same for more than four channels, one channel at a time.
void horizontal_row_wide(const float* line, const Taps& across, int c, float* dst) {
  const int out_w = static_cast<int>(across.first.size());
  for (int x = 0; x < out_w; ++x) {
    const float* w = across.weights_of(x);
    const float* in = line + static_cast<size_t>(across.first[static_cast<size_t>(x)] - across.lo) * c;
    for (int ch = 0; ch < c; ++ch) {
      float sum = 0;
      for (int k = 0; k < across.count[static_cast<size_t>(x)]; ++k) sum += w[4 * k] * in[k * c + ch];
      dst[static_cast<size_t>(x) * c + ch] = sum;
    }
  }
}

// The horizontal pass of source row y into dst (out_w * channels floats and the slack). `line` is
// scratch for the row converted to float, zero past the columns with weight (the padded taps'
// reach, plus the slack).
void horizontal_pass(const SourceRows& source, const Taps& across, int y, float* line, float* dst) {
  const int c = source.channels();
  source.copy(y, across.lo, across.hi - across.lo, line);
  if (c > 4) return horizontal_row_wide(line, across, c, dst);
  switch (across.most) {
    case 1: return horizontal_row<1>(line, across, c, dst);
    case 2: return horizontal_row<2>(line, across, c, dst);
    case 3: return horizontal_row<3>(line, across, c, dst);
    case 4: return horizontal_row<4>(line, across, c, dst);
    case 5: return horizontal_row<5>(line, across, c, dst);
    case 6: return horizontal_row<6>(line, across, c, dst);
    case 7: return horizontal_row<7>(line, across, c, dst);
    case 8: return horizontal_row<8>(line, across, c, dst);
    default: return horizontal_row<0>(line, across, c, dst);
  }
}

// `lanes` consecutive values (1 to 4 * V) of one output row from offset i of its taps' rows of the
// horizontal result, rounded to bytes. V four-lane accumulators stay in registers across the taps.
template <int V>
void vertical_block(const float* const* rows, size_t i, const float* w, int taps, uint8_t* dst, int lanes) {
  F4 sum[V];
  for (int v = 0; v < V; ++v) sum[v] = F4{0, 0, 0, 0};
  for (int k = 0; k < taps; ++k) {
    const F4 wk = load4(w + 4 * k);
    const float* src = rows[k] + i;
    for (int v = 0; v < V; ++v) sum[v] += wk * load4(src + 4 * v);
  }
  if (V % 4 == 0 && lanes == 4 * V) {
    for (int v = 0; v < V; v += 4) store_bytes16(sum + v, dst + 4 * v);
  } else {
    for (int l = 0; l < lanes; ++l) dst[l] = to_byte(sum[l / 4][l % 4]);
  }
}

// The vertical pass of one output row of `elems` values from its taps' rows (whose padding up to a
// multiple of four holds finite values, so whole vectors may be read).
void vertical_pass(const float* const* rows, const float* w, int taps, uint8_t* dst, int elems) {
  constexpr int kVectors = 8;
  int i = 0;
  for (; i + 4 * kVectors <= elems; i += 4 * kVectors)
    vertical_block<kVectors>(rows, static_cast<size_t>(i), w, taps, dst + i, 4 * kVectors);
  for (; i < elems; i += 4) vertical_block<1>(rows, static_cast<size_t>(i), w, taps, dst + i, std::min(4, elems - i));
}
// The part of an axis that box reduction keeps: every input the one-pass filter could weigh for
// `out` outputs of [start, start + size), extended to whole blocks of k where the image allows.
struct Span {
  int begin = 0, end = 0;
};
Span support(int in_size, int start, int size, int out, int k) {
  const double scale = static_cast<double>(size) / out, radius = std::max(scale, 1.0);
  // A pixel of margin on either side: the taps' own rounding of their ends can reach one further.
  const int begin = std::max(static_cast<int>(std::floor(start + 0.5 * scale - radius)) - 1, 0);
  const int end = std::min(static_cast<int>(std::ceil(start + size - 0.5 * scale + radius)) + 1, in_size);
  const int64_t blocks = (end - begin + k - 1) / k;
  return {begin, static_cast<int>(std::min<int64_t>(in_size, begin + blocks * k))};
}

// The taps of an axis reduced in blocks of k from span.begin: the box [start, start + size) in block
// units; the last block is cut short when the span is not a whole number of blocks.
Taps reduced_taps(const Span& span, int start, int size, int out, int k) {
  const int length = span.end - span.begin, blocks = (length + k - 1) / k;  // BoxReduction's height() or width()
  const double last_extent = static_cast<double>(length - (blocks - 1) * k) / k;
  return make_taps(blocks, static_cast<double>(start - span.begin) / k, static_cast<double>(size) / k, out, last_extent);
}

// The two passes over `source` with the taps of each axis.
Image filter(const SourceRows& source, const Taps& across, const Taps& down) {
  const int c = source.channels();
  Image out(static_cast<int>(down.first.size()), static_cast<int>(across.first.size()), c);
  thread_local std::vector<float> line_buffer, ring_buffer;
  const size_t used = static_cast<size_t>(across.hi - across.lo) * c;
  const size_t span = static_cast<size_t>(across.reach - across.lo) * c + kSlack;
  float* line = scratch(line_buffer, span);
  std::fill(line + used, line + span, 0.0f);
  // Horizontal results are kept in a ring of down.most rows, padded to a multiple of four floats
  // with room for the last pixel's four-lane store. An output row's taps are a window of at most
  // that many consecutive source rows, and the windows only move down, so every source row is
  // filtered once, just before the vertical pass reads it from the first-level cache.
  const int elems = out.width * c;
  const size_t pitch = (static_cast<size_t>(elems) + kSlack + 3) / 4 * 4;
  const int ring = std::max(down.most, 1);
  float* rows = scratch(ring_buffer, static_cast<size_t>(ring) * pitch);
  int held[kMaxTaps];  // the source row in each slot of the ring
  std::fill_n(held, ring, -1);
  const float* tap_rows[kMaxTaps];
  for (int y = 0; y < out.height; ++y) {
    const int first = down.first[static_cast<size_t>(y)], taps = down.count[static_cast<size_t>(y)];
    for (int k = 0; k < taps; ++k) {
      const int r = first + k, slot = r % ring;
      float* row = rows + static_cast<size_t>(slot) * pitch;
      if (held[slot] != r) {
        horizontal_pass(source, across, r, line, row);
        held[slot] = r;
      }
      tap_rows[k] = row;
    }
    vertical_pass(tap_rows, down.weights_of(y), taps, out.row(y), elems);
  }
  return out;
}
}  // namespace

Image resample(const Image& source, const Box& box, int out_h, int out_w, bool mirror) {
  CNN_CHECK(box.height > 0 && box.width > 0 && out_h > 0 && out_w > 0, "resample: empty box ", box.height, "x",
            box.width, " or output ", out_h, "x", out_w);
  CNN_CHECK(box.top >= 0 && box.left >= 0 && box.top + box.height <= source.height &&
                box.left + box.width <= source.width,
            "resample: box ", box.height, "x", box.width, " at (", box.top, ", ", box.left, ") is outside the ",
            source.size_str(), " image");
  const int ky = reduction_factor(box.height, out_h), kx = reduction_factor(box.width, out_w);
  if (ky == 1 && kx == 1) {  // one pass
    Taps across = make_taps(source.width, box.left, box.width, out_w);
    if (mirror) reverse_outputs(across);
    return filter(SourceRows(source), across, make_taps(source.height, box.top, box.height, out_h));
  }
  // Box-reduce what the filter would read, then filter the reduced image with the box in its coordinates.
  const Span rows = support(source.height, box.top, box.height, out_h, ky);
  const Span cols = support(source.width, box.left, box.width, out_w, kx);
  const BoxReduction reduction{{rows.begin, cols.begin, rows.end - rows.begin, cols.end - cols.begin}, ky, kx};
  Taps across = reduced_taps(cols, box.left, box.width, out_w, kx);
  if (mirror) reverse_outputs(across);
  return filter(SourceRows(source, reduction), across, reduced_taps(rows, box.top, box.height, out_h, ky));
}

}  // namespace cnn::data
