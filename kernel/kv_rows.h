// The tokens of one KV block where they lie (in the paged cache itself, or in a staging
// buffer), and the decode loops over them: a few float32 query rows dotted with each K row,
// and the softmax weights times each V row added into a few float32 rows. K and V are read
// once, in place, and widened in registers (kernel/simd.h). For every build the order of
// each sum is fixed by the code alone: tokens in order, lanes of a vector by a fixed tree,
// the tail of head_dim last.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernel/simd.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace rpa {

// Token j of a block is at pages[j / page_size] + (j % page_size) * token_stride bytes; a
// head's row starts `offset` bytes further.
struct KvRows {
  const std::byte* const* pages;
  int64_t page_size;
  int64_t token_stride;  // bytes from one token of a page to the next
};

namespace kv_rows_detail {

// The loops over the R rows are unrolled so that each row's accumulator stays a register.
#define RPA_UNROLL_ROWS _Pragma("GCC unroll 8")

// Asks for the row of `bytes` at p ahead of its use: the rows of one head lie a token
// record apart (kilobytes), a stride the hardware prefetchers do not follow across pages,
// so without this every row is a full memory latency.
inline void prefetch_row(const std::byte* p, int64_t bytes) {
#if defined(__SSE__)
  for (int64_t off = 0; off < bytes; off += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T1);
  }
#else
  (void)p;
  (void)bytes;
#endif
}

// Calls f(page_ptr, j0, count, next_page, next_count) for the pages of tokens [0, n), in
// order; next_page holds the next_count tokens after them, of the first `ahead` (>= n), or
// is nullptr.
template <class F>
inline void for_each_page(const KvRows& src, int64_t n, int64_t ahead, F&& f) {
  for (int64_t j0 = 0, i = 0; j0 < n; j0 += src.page_size, ++i) {
    const int64_t count = n - j0 < src.page_size ? n - j0 : src.page_size;
    const int64_t next_j0 = j0 + count;
    const int64_t next_count = ahead - next_j0 < src.page_size ? ahead - next_j0 : src.page_size;
    f(src.pages[i], j0, count, next_j0 < ahead ? src.pages[i + 1] : nullptr,
      next_j0 < ahead ? next_count : 0);
  }
}

// Heads of one page, token by token: token t's rows of every head are read in memory
// order before token t + 1's, which the hardware prefetchers follow within the page.
struct HeadsLayout {
  int64_t heads;       // heads walked per token
  int64_t head_bytes;  // from one head's row to the next within a token
  int64_t q_head;      // floats from one head's query rows to the next
  int64_t out_head;    // floats from one head's outputs to the next
};

// Queries as float32 (any Kv), or as bfloat16 bits against bfloat16 K with the BF16 dot
// instruction (QElem uint16_t: 32 elements per instruction, exact products paired per lane).
template <class Kv, int R, class QElem = float>
inline void dots_page(const QElem* q, int64_t d, const std::byte* page, int64_t offset,
                      int64_t stride, int64_t count, float* out, int64_t ld,
                      const std::byte* next, int64_t next_count, const HeadsLayout& hl) {
  using Elem = typename Kv::Elem;
  constexpr bool kBf16Pairs = std::is_same_v<QElem, uint16_t>;
  constexpr int L = kBf16Pairs ? 32 : simd::kLanes;  // elements per step
  const int64_t dv = d - d % L;
  const auto row_bytes = static_cast<int64_t>(d * sizeof(Elem));
  for (int64_t t = 0; t < count; ++t) {
    for (int64_t h = 0; h < hl.heads; ++h) {
      const int64_t off = offset + h * hl.head_bytes;
      // The K row and the V row after it: V is read by the row update after the step's
      // softmax, from L2 by then, while this pass keeps more misses in flight.
      if (t < next_count) prefetch_row(next + t * stride + off, 2 * row_bytes);
      const auto* k = reinterpret_cast<const Elem*>(page + t * stride + off);
      const QElem* qh = q + h * hl.q_head;
      simd::Vec acc[R];
      RPA_UNROLL_ROWS for (int i = 0; i < R; ++i) acc[i] = simd::zero();
      for (int64_t c = 0; c < dv; c += L) {
        if constexpr (kBf16Pairs) {
#if defined(__AVX512BF16__) && defined(__AVX512F__)
          RPA_UNROLL_ROWS for (int i = 0; i < R; ++i) acc[i] = simd::bf16_dot(acc[i], qh + i * d + c, k + c);
#endif
        } else {
          const simd::Vec kv = simd::kv_load<Kv>(k + c);
          RPA_UNROLL_ROWS for (int i = 0; i < R; ++i) acc[i] = simd::fma(simd::load(qh + i * d + c), kv, acc[i]);
        }
      }
      float* oh = out + h * hl.out_head;
      RPA_UNROLL_ROWS for (int i = 0; i < R; ++i) {
        float s = simd::sum(acc[i]);
        for (int64_t c = dv; c < d; ++c) {
          float qc;
          if constexpr (kBf16Pairs) {
            qc = simd::kv_load_one<simd::BF16>(qh + i * d, c);
          } else {
            qc = qh[i * d + c];
          }
          s = simd::fma_one(qc, simd::kv_load_one<Kv>(k, c), s);
        }
        oh[i * ld + t] = s;
      }
    }
  }
}

// Tokens per pass of the row update: their V rows stay in L1 while each vector of the
// accumulators is swept over them.
inline constexpr int64_t kTokensPerPass = 16;

template <class Kv, int R>
inline void axpy_page(const float* w, int64_t ld, const std::byte* page, int64_t offset,
                      int64_t stride, int64_t count, int64_t d, float* out,
                      const std::byte* next, int64_t next_count) {
  using Elem = typename Kv::Elem;
  constexpr int L = simd::kLanes;
  const int64_t dv = d - d % L;
  const auto row_bytes = static_cast<int64_t>(d * sizeof(Elem));
  for (int64_t t = 0; t < next_count; ++t) prefetch_row(next + t * stride + offset, row_bytes);
  for (int64_t t0 = 0; t0 < count; t0 += kTokensPerPass) {
    const int64_t t1 = count - t0 < kTokensPerPass ? count : t0 + kTokensPerPass;
    // Two vectors of each row at once where the registers allow: twice the independent
    // chains of fused multiply-adds (each element's sum still runs over the tokens in order).
    constexpr int C = R <= 4 && L >= 8 ? 2 : 1;
    int64_t c = 0;
    for (; c + C * L <= dv; c += C * L) {
      simd::Vec acc[C][R];
      RPA_UNROLL_ROWS for (int i = 0; i < R; ++i) {
        for (int k = 0; k < C; ++k) acc[k][i] = simd::load(out + i * d + c + k * L);
      }
      for (int64_t t = t0; t < t1; ++t) {
        const auto* row = reinterpret_cast<const Elem*>(page + t * stride + offset) + c;
        simd::Vec v[C];
        for (int k = 0; k < C; ++k) v[k] = simd::kv_load<Kv>(row + k * L);
        RPA_UNROLL_ROWS for (int i = 0; i < R; ++i) {
          const simd::Vec wi = simd::set1(w[i * ld + t]);
          for (int k = 0; k < C; ++k) acc[k][i] = simd::fma(wi, v[k], acc[k][i]);
        }
      }
      RPA_UNROLL_ROWS for (int i = 0; i < R; ++i) {
        for (int k = 0; k < C; ++k) simd::store(out + i * d + c + k * L, acc[k][i]);
      }
    }
    for (; c < dv; c += L) {
      simd::Vec acc[R];
      RPA_UNROLL_ROWS for (int i = 0; i < R; ++i) acc[i] = simd::load(out + i * d + c);
      for (int64_t t = t0; t < t1; ++t) {
        const simd::Vec v =
            simd::kv_load<Kv>(reinterpret_cast<const Elem*>(page + t * stride + offset) + c);
        RPA_UNROLL_ROWS for (int i = 0; i < R; ++i) acc[i] = simd::fma(simd::set1(w[i * ld + t]), v, acc[i]);
      }
      RPA_UNROLL_ROWS for (int i = 0; i < R; ++i) simd::store(out + i * d + c, acc[i]);
    }
    for (int64_t e = dv; e < d; ++e) {
      for (int64_t t = t0; t < t1; ++t) {
        const float v =
            simd::kv_load_one<Kv>(reinterpret_cast<const Elem*>(page + t * stride + offset), e);
        RPA_UNROLL_ROWS for (int i = 0; i < R; ++i) {
          out[i * d + e] = simd::fma_one(w[i * ld + t], v, out[i * d + e]);
        }
      }
    }
  }
}

#undef RPA_UNROLL_ROWS

}  // namespace kv_rows_detail

// The most rows the decode loops take at once.
inline constexpr int kMaxFewRows = 8;

// Calls f(std::integral_constant<int, R>) for R = rows (1 to kMaxFewRows; more counts as
// kMaxFewRows), so that each row count gets loops with its accumulators in registers.
template <class F>
inline void with_rows(int rows, F&& f) {
  switch (rows) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, 3>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 5: return f(std::integral_constant<int, 5>{});
    case 6: return f(std::integral_constant<int, 6>{});
    case 7: return f(std::integral_constant<int, 7>{});
    default: return f(std::integral_constant<int, 8>{});
  }
}

// out[i * ld + j] = sum_c q[i * d + c] * K_j[c] for rows i < rows (at most kMaxFewRows) and
// the count tokens j of one page: K_j at page + j * stride + offset, d elements of type Kv.
// next / next_count: a later page of the block, whose rows at `offset` are asked for ahead
// (nullptr, 0: none). hl: walk that many heads per token, token by token, head h's rows
// head_bytes further on, its query rows at q + h * q_head, its outputs at out + h * out_head.
template <class Kv>
void few_row_dots(const float* q, int rows, int64_t d, const std::byte* page, int64_t offset,
                  int64_t stride, int64_t count, float* out, int64_t ld,
                  const std::byte* next = nullptr, int64_t next_count = 0,
                  const kv_rows_detail::HeadsLayout& hl = {1, 0, 0, 0}) {
  using namespace kv_rows_detail;
  with_rows(rows, [&](auto r) {
    dots_page<Kv, decltype(r)::value>(q, d, page, offset, stride, count, out, ld, next, next_count, hl);
  });
}

#if defined(__AVX512BF16__) && defined(__AVX512F__)
// few_row_dots for bfloat16 queries (their bits, rows of d) against bfloat16 K rows, with the
// BF16 dot instruction (simd::kBf16Dot): the same sums of exact products, paired per lane.
inline void few_row_dots_bf16(const uint16_t* q, int rows, int64_t d, const std::byte* page,
                              int64_t offset, int64_t stride, int64_t count, float* out,
                              int64_t ld, const std::byte* next, int64_t next_count,
                              const kv_rows_detail::HeadsLayout& hl) {
  using namespace kv_rows_detail;
  using B = simd::BF16;
  with_rows(rows, [&](auto r) {
    dots_page<B, decltype(r)::value>(q, d, page, offset, stride, count, out, ld, next, next_count, hl);
  });
}
#endif

// out[i * d + c] += sum_j w[i * ld + j] * V_j[c], the count tokens of one page in order, for
// rows i < rows (V_j as K_j above).
template <class Kv>
void few_row_axpy(const float* w, int rows, int64_t ld, const std::byte* page, int64_t offset,
                  int64_t stride, int64_t count, int64_t d, float* out,
                  const std::byte* next = nullptr, int64_t next_count = 0) {
  using namespace kv_rows_detail;
  with_rows(rows, [&](auto r) {
    axpy_page<Kv, decltype(r)::value>(w, ld, page, offset, stride, count, d, out, next, next_count);
  });
}

// Calls f(page_ptr, j0, count, next_page, next_count) for the pages that hold tokens [0, n)
// of the block, in order; next_page is the page after (nullptr after the last page of the
// first `ahead` tokens, ahead >= n), for the loops to ask for ahead.
template <class F>
void for_each_kv_page(const KvRows& src, int64_t n, F&& f) {
  kv_rows_detail::for_each_page(src, n, n, f);
}
template <class F>
void for_each_kv_page(const KvRows& src, int64_t n, int64_t ahead, F&& f) {
  kv_rows_detail::for_each_page(src, n, ahead, f);
}

}  // namespace rpa
