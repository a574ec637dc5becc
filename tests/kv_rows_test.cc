// The decode and prefill loops' building blocks (kernel/simd.h, kernel/kv_rows.h,
// kernel/panel_gemm.h): every vector load
// widens a KV element exactly as load_as_float32 does, flush-to-zero or not; the few-row
// dot products and row updates agree with a sum in double within float32 rounding, and
// their bits do not depend on where the rows lie (alignment, page boundaries) or on a tail
// of head_dim that is not a whole vector; the prefill panels stop each row at its own key.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "core/dtype.h"
#include "kernel/kv_rows.h"
#include "kernel/panel_gemm.h"
#include "kernel/simd.h"

namespace rpa {
namespace {

// Sets FTZ and DAZ while alive, as the kernel runs.
class FlushToZero {
 public:
#if defined(__SSE__)
  FlushToZero() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | 0x8040); }
  ~FlushToZero() { _mm_setcsr(saved_); }

 private:
  unsigned saved_;
#endif
};

bool same_value(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y;  // signed zeros too
}

// Every code of a KV element type through the vector load (kLanes at a time) and the
// scalar one, against load_as_float32.
template <class Kv>
void expect_every_code_widens_exactly(DType t, bool flush) {
  using Elem = typename Kv::Elem;
  const int64_t codes = int64_t{1} << (8 * sizeof(Elem));
  std::vector<Elem> all(static_cast<size_t>(codes + simd::kLanes));
  for (int64_t i = 0; i < codes + simd::kLanes; ++i) all[static_cast<size_t>(i)] = static_cast<Elem>(i % codes);
  std::optional<FlushToZero> ftz;
  if (flush) ftz.emplace();
  int64_t wrong = 0;
  for (int64_t i = 0; i < codes; i += simd::kLanes) {
    float lanes[simd::kLanes];
    simd::store(lanes, simd::kv_load<Kv>(all.data() + i));
    for (int k = 0; k < simd::kLanes; ++k) {
      const float want = load_as_float32(t, all.data(), i + k);
      if (!same_value(lanes[k], want) || !same_value(simd::kv_load_one<Kv>(all.data(), i + k), want)) {
        if (++wrong <= 5) {
          ADD_FAILURE() << dtype_name(t) << " code " << (i + k) << ": vector " << lanes[k]
                        << ", scalar " << simd::kv_load_one<Kv>(all.data(), i + k) << ", want " << want;
        }
      }
    }
  }
  EXPECT_EQ(wrong, 0) << "of " << codes << " codes (" << simd::kName << ", flush " << flush << ")";
}

#if defined(RPA_EXPECT_SIMD_LANES)
// A variant build of this test compiles the vector path it is named for.
TEST(SimdLoads, VariantBuildUsesItsVectorWidth) {
  EXPECT_EQ(simd::kLanes, RPA_EXPECT_SIMD_LANES) << simd::kName;
}
#endif

TEST(SimdLoads, EveryCodeWidensAsLoadAsFloat32) {
  for (const bool flush : {false, true}) {
    expect_every_code_widens_exactly<simd::BF16>(DType::kBFloat16, flush);
    expect_every_code_widens_exactly<simd::E4M3>(DType::kFloat8E4M3FN, flush);
    expect_every_code_widens_exactly<simd::E5M2>(DType::kFloat8E5M2, flush);
  }
}

// The vector bfloat16 store rounds as float_to_bf16: every bfloat16 value and the float32s
// around each (the tie halfway to the next, one ulp either side of it), infinities, NaNs
// with payloads in either half, the largest finites (rounding up to infinity).
TEST(SimdStores, Bf16RoundsAsFloatToBf16) {
  std::vector<float> xs;
  for (uint32_t b = 0; b < 0x10000; ++b) {
    for (const uint32_t low : {0u, 1u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      const uint32_t bits = (b << 16) | low;
      float x;
      std::memcpy(&x, &bits, 4);
      xs.push_back(x);
    }
  }
  while (xs.size() % simd::kLanes != 0) xs.push_back(1.0f);
  std::vector<uint16_t> got(xs.size());
  for (size_t i = 0; i < xs.size(); i += simd::kLanes) simd::store_bf16(got.data() + i, simd::load(xs.data() + i));
  int64_t wrong = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (got[i] != float_to_bf16(xs[i]) && ++wrong <= 5) {
      uint32_t bits;
      std::memcpy(&bits, &xs[i], 4);
      ADD_FAILURE() << std::hex << "float bits 0x" << bits << ": 0x" << got[i] << ", want 0x" << float_to_bf16(xs[i]);
    }
  }
  EXPECT_EQ(wrong, 0) << "of " << xs.size() << " values (" << simd::kName << ")";
}

// Rows of d float32 laid out as tokens of a paged block: page_size tokens per page, pages
// scattered in one buffer, each token `stride` bytes after the previous, the row at
// `offset` bytes into the token, the whole buffer shifted by `shift` bytes.
struct PagedRows {
  std::vector<std::byte> buf;
  std::vector<const std::byte*> pages;
  int64_t page_size, stride, offset;
  KvRows rows() const { return {.pages = pages.data(), .page_size = page_size, .token_stride = stride}; }
  const float* row(int64_t j) const {
    return reinterpret_cast<const float*>(pages[static_cast<size_t>(j / page_size)] +
                                          (j % page_size) * stride + offset);
  }
};

PagedRows paged_rows(const std::vector<float>& data, int64_t n, int64_t d, int64_t page_size,
                     int64_t shift) {
  PagedRows r;
  r.page_size = page_size;
  r.offset = 12;
  r.stride = r.offset + d * 4 + 20;
  const int64_t npages = (n + page_size - 1) / page_size;
  const int64_t page_bytes = page_size * r.stride;
  r.buf.resize(static_cast<size_t>(2 * npages * page_bytes + shift + 64));
  for (int64_t p = 0; p < npages; ++p) {
    // Pages in reverse order, one unused page between: nothing assumes contiguity.
    r.pages.push_back(r.buf.data() + shift + 2 * (npages - 1 - p) * page_bytes);
  }
  for (int64_t j = 0; j < n; ++j) {
    std::memcpy(const_cast<float*>(r.row(j)), data.data() + j * d, static_cast<size_t>(d) * 4);
  }
  return r;
}

// Dots over pages, as the kernel calls them.
std::vector<float> dots(const std::vector<float>& q, int rows, int64_t d, const PagedRows& k,
                        int64_t n) {
  std::vector<float> out(static_cast<size_t>(rows * n));
  for_each_kv_page(k.rows(), n, [&](const std::byte* page, int64_t j0, int64_t count,
                                    const std::byte* next, int64_t next_count) {
    few_row_dots<simd::F32>(q.data(), rows, d, page, k.offset, k.stride, count, out.data() + j0, n,
                            next, next_count);
  });
  return out;
}

std::vector<float> axpy(const std::vector<float>& w, int rows, int64_t d, const PagedRows& v,
                        int64_t n) {
  std::vector<float> out(static_cast<size_t>(rows * d), 0.0f);
  for_each_kv_page(v.rows(), n, [&](const std::byte* page, int64_t j0, int64_t count,
                                    const std::byte* next, int64_t next_count) {
    few_row_axpy<simd::F32>(w.data() + j0, rows, n, page, v.offset, v.stride, count, d, out.data(),
                            next, next_count);
  });
  return out;
}

// sum_k a[k * sa] * b[k * sb] in double, and the sum of the products' magnitudes.
struct Exact {
  double sum = 0, mag = 0;
};
Exact exact_dot(const float* a, int64_t sa, const float* b, int64_t sb, int64_t n) {
  Exact e;
  for (int64_t k = 0; k < n; ++k) {
    const double x = double{a[k * sa]} * b[k * sb];
    e.sum += x;
    e.mag += std::abs(x);
  }
  return e;
}

std::vector<float> normal_floats(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

// Head dims around the vector width (tails of every length) and page sizes that cut the
// tokens unevenly; rows 1 to 8.
TEST(FewRows, DotsAndRowUpdatesAgreeWithDoubleAndIgnoreLayout) {
  for (const int64_t d : {1, 3, 8, 15, 16, 17, 33, 64, 128, 130}) {
    for (const int rows : {1, 2, 4, 5, 8}) {
      const int64_t n = 37;
      SCOPED_TRACE("d " + std::to_string(d) + ", rows " + std::to_string(rows));
      const std::vector<float> q = normal_floats(rows * d, 1);
      const std::vector<float> kv = normal_floats(n * d, 2);
      const std::vector<float> w = normal_floats(rows * n, 3);
      const PagedRows base = paged_rows(kv, n, d, 5, 0);
      const std::vector<float> got_dots = dots(q, rows, d, base, n);
      const std::vector<float> got_axpy = axpy(w, rows, d, base, n);
      for (int i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          // A float32 sum of d products rounds at most d times: d * 2^-24 * sum |q_c k_c|.
          const Exact e = exact_dot(q.data() + i * d, 1, kv.data() + j * d, 1, d);
          EXPECT_NEAR(got_dots[i * n + j], e.sum, static_cast<double>(d) * 0x1p-24 * e.mag + 1e-30);
        }
        for (int64_t c = 0; c < d; ++c) {
          // n fused multiply-adds into one float32: n * 2^-24 * sum |w_j v_jc|.
          const Exact e = exact_dot(w.data() + i * n, 1, kv.data() + c, d, n);
          EXPECT_NEAR(got_axpy[i * d + c], e.sum, static_cast<double>(n) * 0x1p-24 * e.mag + 1e-30);
        }
      }
      // The same rows elsewhere (shifted by 4 and 36 bytes, one page of 37 tokens, pages of
      // 1): the same bits.
      for (const auto& [page_size, shift] : {std::pair<int64_t, int64_t>{5, 4}, {37, 36}, {1, 8}}) {
        const PagedRows moved = paged_rows(kv, n, d, page_size, shift);
        EXPECT_TRUE(dots(q, rows, d, moved, n) == got_dots) << "page " << page_size << ", shift " << shift;
        EXPECT_TRUE(axpy(w, rows, d, moved, n) == got_axpy) << "page " << page_size << ", shift " << shift;
      }
    }
  }
}

// bfloat16 and float8 rows widened in registers give exactly the dots of their float32
// values: the loads are exact, the arithmetic is the same.
TEST(FewRows, NarrowRowsDotAsTheirFloat32Values) {
  const int64_t d = 40, n = 9;
  const int rows = 3;
  const std::vector<float> q = normal_floats(rows * d, 4);
  const std::vector<float> x = normal_floats(n * d, 5);
  std::vector<uint16_t> bf(static_cast<size_t>(n * d));
  std::vector<uint8_t> e4(static_cast<size_t>(n * d)), e5(static_cast<size_t>(n * d));
  std::vector<float> bf_f(bf.size()), e4_f(bf.size()), e5_f(bf.size());
  for (size_t i = 0; i < bf.size(); ++i) {
    bf[i] = float_to_bf16(x[i]);
    e4[i] = float_to_e4m3fn(x[i]);
    e5[i] = float_to_e5m2(x[i]);
    bf_f[i] = bf16_to_float(bf[i]);
    e4_f[i] = e4m3fn_to_float(e4[i]);
    e5_f[i] = e5m2_to_float(e5[i]);
  }
  auto run = [&](auto tag, const void* data, int64_t elem) {
    using Kv = decltype(tag);
    std::vector<float> out(static_cast<size_t>(rows * n));
    few_row_dots<Kv>(q.data(), rows, d, static_cast<const std::byte*>(data), 0, d * elem, n, out.data(), n);
    return out;
  };
  EXPECT_TRUE(run(simd::BF16{}, bf.data(), 2) == run(simd::F32{}, bf_f.data(), 4));
  EXPECT_TRUE(run(simd::E4M3{}, e4.data(), 1) == run(simd::F32{}, e4_f.data(), 4));
  EXPECT_TRUE(run(simd::E5M2{}, e5.data(), 1) == run(simd::F32{}, e5_f.data(), 4));
}

#if defined(__AVX512BF16__) && defined(__AVX512F__)
// The BF16 dot instruction's logits (bfloat16 q and K) agree with double within a float32
// sum's rounding, head dims with tails under 32 included, and walk heads as the kernel does.
TEST(FewRows, Bf16DotInstructionAgreesWithDouble) {
  for (const int64_t d : {2, 31, 32, 40, 128}) {
    for (const int rows : {1, 4, 8}) {
      SCOPED_TRACE("d " + std::to_string(d) + ", rows " + std::to_string(rows));
      const int64_t n = 21, heads = 2;
      std::vector<uint16_t> q(static_cast<size_t>(heads * rows * d)), k(static_cast<size_t>(n * heads * 2 * d));
      for (size_t i = 0; i < q.size(); ++i) q[i] = float_to_bf16(normal_floats(1, 100 + i)[0]);
      for (size_t i = 0; i < k.size(); ++i) k[i] = float_to_bf16(normal_floats(1, 5000 + i)[0]);
      // Token t: head 0 K, head 0 V, head 1 K, head 1 V (rows of d).
      const kv_rows_detail::HeadsLayout hl{.heads = heads, .head_bytes = 2 * d * 2, .q_head = rows * d, .out_head = rows * n};
      std::vector<float> out(static_cast<size_t>(heads * rows * n));
      few_row_dots_bf16(q.data(), rows, d, reinterpret_cast<const std::byte*>(k.data()), 0, heads * 2 * d * 2, n,
                        out.data(), n, nullptr, 0, hl);
      for (int64_t h = 0; h < heads; ++h) {
        for (int i = 0; i < rows; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double exact = 0, mag = 0;
            for (int64_t c = 0; c < d; ++c) {
              const double x = double{bf16_to_float(q[static_cast<size_t>((h * rows + i) * d + c)])} *
                               bf16_to_float(k[static_cast<size_t>((j * heads * 2 + 2 * h) * d + c)]);
              exact += x;
              mag += std::abs(x);
            }
            // d exact products added in float32: d * 2^-24 * sum |q_c k_c|.
            EXPECT_NEAR(out[static_cast<size_t>((h * rows + i) * n + j)], exact,
                        static_cast<double>(d) * 0x1p-24 * mag + 1e-30);
          }
        }
      }
    }
  }
}
#endif

// Panels of every height around the register tiles (1 to 19 rows), keys around the vector
// width, head dims with tails; each row's keys grow as a causal panel's do (a step every 4
// rows, as with 4 q heads per kv head). Logits match double within a float32 sum's rounding
// up to each row's own keys; the weighted sum matches double over exactly those keys when the
// weights past them are 0, as the kernel leaves them.
TEST(PanelGemm, RowsStopAtTheirOwnKeys) {
  for (const int64_t d : {1, 7, 16, 33, 128}) {
    for (const int64_t rows : {1, 3, 8, 11, 19}) {
      for (const int64_t n : {1, 15, 16, 17, 40}) {
        SCOPED_TRACE("d " + std::to_string(d) + ", rows " + std::to_string(rows) + ", n " + std::to_string(n));
        const int64_t ldk = (n + simd::kLanes - 1) / simd::kLanes * simd::kLanes + simd::kLanes;
        const std::vector<float> q = normal_floats(rows * d, 6);
        const std::vector<float> k = normal_floats(n * d, 7);
        const std::vector<float> v = normal_floats(n * d, 8);
        std::vector<float> kt(static_cast<size_t>(d * ldk), 0.0f);
        for (int64_t j = 0; j < n; ++j) {
          for (int64_t c = 0; c < d; ++c) kt[static_cast<size_t>(c * ldk + j)] = k[static_cast<size_t>(j * d + c)];
        }
        std::vector<int64_t> keys(static_cast<size_t>(rows));
        for (int64_t i = 0; i < rows; ++i) keys[static_cast<size_t>(i)] = std::min<int64_t>(n, 1 + i / 4 + n / 2);
        std::vector<float> logits(static_cast<size_t>(rows * ldk), -7.0f);
        panel_logits(q.data(), rows, d, kt.data(), ldk, keys.data(), logits.data(), ldk);
        std::vector<float> w = normal_floats(rows * ldk, 9);
        for (int64_t i = 0; i < rows; ++i) {
          const int64_t upto = weighted_sum_keys(keys.data(), rows, i);
          ASSERT_GE(upto, keys[static_cast<size_t>(i)]);
          ASSERT_LE(upto, n);
          for (int64_t j = keys[static_cast<size_t>(i)]; j < upto; ++j) w[static_cast<size_t>(i * ldk + j)] = 0.0f;
        }
        std::vector<float> sum(static_cast<size_t>(rows * d), -7.0f);
        const std::byte* v_bytes = reinterpret_cast<const std::byte*>(v.data());
        const PagedV v_rows{{&v_bytes, n, d * 4}, 0};
        panel_weighted_sum<simd::F32>(w.data(), ldk, rows, keys.data(), v_rows, d, sum.data());
        for (int64_t i = 0; i < rows; ++i) {
          for (int64_t j = 0; j < keys[static_cast<size_t>(i)]; ++j) {
            // d fused multiply-adds: d * 2^-24 * sum |q_c k_c|.
            const Exact e = exact_dot(q.data() + i * d, 1, k.data() + j * d, 1, d);
            EXPECT_NEAR(logits[static_cast<size_t>(i * ldk + j)], e.sum, static_cast<double>(d) * 0x1p-24 * e.mag + 1e-30);
          }
          for (int64_t c = 0; c < d; ++c) {
            // n fused multiply-adds: n * 2^-24 * sum |w_j v_jc|.
            const Exact e = exact_dot(w.data() + i * ldk, 1, v.data() + c, d, keys[static_cast<size_t>(i)]);
            EXPECT_NEAR(sum[static_cast<size_t>(i * d + c)], e.sum, static_cast<double>(n) * 0x1p-24 * e.mag + 1e-30);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace rpa
