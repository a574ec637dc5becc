// The two products of a prefill block, as register-tiled loops over float32 (kernel/simd.h):
// the logits of a panel of query rows against a block's keys, and the weighted sum of the
// block's V rows. Each row stops at its own last key (row_keys), so the causal triangle is
// left out to within one register tile of rows, without a GEMM call per sub-panel. Every
// output element is one sum in a fixed order (over the head dimension for logits, over the
// keys for the weighted sum), so the bits follow from the inputs alone.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernel/kv_rows.h"
#include "kernel/simd.h"

namespace rpa {

// A head's K or V rows where they lie: key j's row at pages[j / page_size] + (j % page_size) *
// token_stride + offset.
struct PagedV {
  KvRows rows;
  int64_t offset;
};

// kt[c * ldk + j] = K_j[c] for keys j < n, widened from Kv (K rows where k says), a page of
// keys at a time; then kt zero from key n to the end of its last vector (at most ldk).
template <class Kv>
void transpose_keys(const PagedV& k, int64_t n, int64_t d, float* kt, int64_t ldk) {
  using Elem = typename Kv::Elem;
  for (int64_t j0 = 0, p = 0; j0 < n; j0 += k.rows.page_size, ++p) {
    const std::byte* page = k.rows.pages[p] + k.offset;
    const int64_t count = std::min(k.rows.page_size, n - j0);
    for (int64_t c = 0; c < d; ++c) {
      float* col = kt + c * ldk + j0;
      for (int64_t t = 0; t < count; ++t) {
        col[t] = simd::kv_load_one<Kv>(reinterpret_cast<const Elem*>(page + t * k.rows.token_stride), c);
      }
    }
  }
  for (int64_t c = 0; c < d; ++c) std::fill(kt + c * ldk + n, kt + c * ldk + std::min(ldk, n + simd::kLanes), 0.0f);
}

namespace panel_detail {

// Register tiles: rows x vectors of accumulators, within the build's vector registers.
#if defined(__AVX512F__)
inline constexpr int kLogitRows = 8, kLogitVecs = 2;  // 16 accumulators of 32
inline constexpr int kSumRows = 3, kSumVecs = 8;      // 24 accumulators of 32
#else
inline constexpr int kLogitRows = 4, kLogitVecs = 2;  // 8 accumulators of 16
inline constexpr int kSumRows = 2, kSumVecs = 4;      // 8 accumulators of 16
#endif

#define RPA_UNROLL_TILE _Pragma("GCC unroll 8")

// logits of rows [i0, i0 + R) for keys [j0, j0 + V * kLanes).
template <int R, int V>
inline void logit_tile(const float* q, int64_t d, const float* kt, int64_t ldk, int64_t i0,
                       int64_t j0, float* out, int64_t ld) {
  constexpr int L = simd::kLanes;
  simd::Vec acc[R][V];
  RPA_UNROLL_TILE for (int i = 0; i < R; ++i) {
    RPA_UNROLL_TILE for (int v = 0; v < V; ++v) acc[i][v] = simd::zero();
  }
  for (int64_t c = 0; c < d; ++c) {
    simd::Vec k[V];
    RPA_UNROLL_TILE for (int v = 0; v < V; ++v) k[v] = simd::load(kt + c * ldk + j0 + v * L);
    RPA_UNROLL_TILE for (int i = 0; i < R; ++i) {
      const simd::Vec b = simd::set1(q[(i0 + i) * d + c]);
      RPA_UNROLL_TILE for (int v = 0; v < V; ++v) acc[i][v] = simd::fma(b, k[v], acc[i][v]);
    }
  }
  RPA_UNROLL_TILE for (int i = 0; i < R; ++i) {
    RPA_UNROLL_TILE for (int v = 0; v < V; ++v) simd::store(out + (i0 + i) * ld + j0 + v * L, acc[i][v]);
  }
}

// The same sums one key at a time, for the keys [j0, j1) a whole vector does not cover.
inline void logit_columns(const float* q, int64_t d, const float* kt, int64_t ldk, int64_t i0,
                          int64_t i1, int64_t j0, int64_t j1, float* out, int64_t ld) {
  for (int64_t i = i0; i < i1; ++i) {
    for (int64_t j = j0; j < j1; ++j) {
      float s = 0.0f;
      for (int64_t c = 0; c < d; ++c) s = simd::fma_one(q[i * d + c], kt[c * ldk + j], s);
      out[i * ld + j] = s;
    }
  }
}

// out rows [i0, i0 + R), columns [c0, c0 + V * kLanes) = sum over keys [0, n) of w * V, V
// widened in registers.
template <class Kv, int R, int V>
inline void sum_tile(const float* w, int64_t ld, const PagedV& pv, int64_t d, int64_t i0,
                     int64_t c0, int64_t n, float* out) {
  using Elem = typename Kv::Elem;
  constexpr int L = simd::kLanes;
  simd::Vec acc[R][V];
  RPA_UNROLL_TILE for (int i = 0; i < R; ++i) {
    RPA_UNROLL_TILE for (int u = 0; u < V; ++u) acc[i][u] = simd::zero();
  }
  for (int64_t j0 = 0, p = 0; j0 < n; j0 += pv.rows.page_size, ++p) {
    const std::byte* page = pv.rows.pages[p] + pv.offset;
    const int64_t count = std::min(pv.rows.page_size, n - j0);
    for (int64_t t = 0; t < count; ++t) {
      const auto* v = reinterpret_cast<const Elem*>(page + t * pv.rows.token_stride) + c0;
      const int64_t j = j0 + t;
      RPA_UNROLL_TILE for (int u = 0; u < V; ++u) {
        const simd::Vec x = simd::kv_load<Kv>(v + u * L);
        RPA_UNROLL_TILE for (int i = 0; i < R; ++i) {
          acc[i][u] = simd::fma(simd::set1(w[(i0 + i) * ld + j]), x, acc[i][u]);
        }
      }
    }
  }
  RPA_UNROLL_TILE for (int i = 0; i < R; ++i) {
    RPA_UNROLL_TILE for (int u = 0; u < V; ++u) simd::store(out + (i0 + i) * d + c0 + u * L, acc[i][u]);
  }
}

#undef RPA_UNROLL_TILE

}  // namespace panel_detail

// out[i * ld + j] = sum_c q[i * d + c] * K_j[c] for rows i < rows and keys j < row_keys[i]
// (row_keys non-decreasing, each at most the columns of kt), with K transposed: K_j[c] at
// kt[c * ldk + j], ldk a multiple of simd::kLanes and kt zero past the last key. Entries of
// a row past its row_keys may be written (up to its tile's last row's count, rounded up to
// whole vectors within ldk): logits with those later keys, or 0 past the last; ld >= ldk.
inline void panel_logits(const float* q, int64_t rows, int64_t d, const float* kt, int64_t ldk,
                         const int64_t* row_keys, float* out, int64_t ld) {
  using namespace panel_detail;
  constexpr int L = simd::kLanes;
  constexpr int64_t kTileKeys = kLogitVecs * L;
  int64_t i0 = 0;
  for (; i0 + kLogitRows <= rows; i0 += kLogitRows) {
    const int64_t keys = row_keys[i0 + kLogitRows - 1];
    int64_t j0 = 0;
    for (; j0 + kTileKeys <= keys; j0 += kTileKeys) {
      logit_tile<kLogitRows, kLogitVecs>(q, d, kt, ldk, i0, j0, out, ld);
    }
    for (; j0 < keys && j0 + L <= ldk; j0 += L) logit_tile<kLogitRows, 1>(q, d, kt, ldk, i0, j0, out, ld);
    logit_columns(q, d, kt, ldk, i0, i0 + kLogitRows, j0, keys, out, ld);
  }
  for (; i0 < rows; ++i0) {  // rows past the last whole tile, one at a time
    const int64_t keys = row_keys[i0];
    int64_t j0 = 0;
    for (; j0 < keys && j0 + L <= ldk; j0 += L) logit_tile<1, 1>(q, d, kt, ldk, i0, j0, out, ld);
    logit_columns(q, d, kt, ldk, i0, i0 + 1, j0, keys, out, ld);
  }
}

// The keys panel_weighted_sum sums over for row i of `rows`: row_keys of the last row of
// i's register tile.
inline int64_t weighted_sum_keys(const int64_t* row_keys, int64_t rows, int64_t i) {
  constexpr int64_t R = panel_detail::kSumRows;
  const int64_t full = rows - rows % R;
  return i < full ? row_keys[i - i % R + R - 1] : row_keys[i];
}

// out[i * d + c] = sum over keys j < weighted_sum_keys(row_keys, rows, i) of
// w[i * ld + j] * V_j[c], keys in order, for rows i < rows, V read where it lies (pv) and
// widened in registers: w must be 0 from a row's own row_keys up to that (the caller zeroes
// it).
template <class Kv>
void panel_weighted_sum(const float* w, int64_t ld, int64_t rows, const int64_t* row_keys,
                        const PagedV& pv, int64_t d, float* out) {
  using namespace panel_detail;
  using Elem = typename Kv::Elem;
  constexpr int L = simd::kLanes;
  constexpr int64_t kTileCols = kSumVecs * L;
  auto row_block = [&](auto rows_tag, int64_t i0) {
    constexpr int R = decltype(rows_tag)::value;
    const int64_t n = row_keys[i0 + R - 1];
    int64_t c0 = 0;
    for (; c0 + kTileCols <= d; c0 += kTileCols) sum_tile<Kv, R, kSumVecs>(w, ld, pv, d, i0, c0, n, out);
    for (; c0 + L <= d; c0 += L) sum_tile<Kv, R, 1>(w, ld, pv, d, i0, c0, n, out);
    for (int64_t i = i0; i < i0 + R; ++i) {
      for (int64_t c = c0; c < d; ++c) {
        float s = 0.0f;
        for (int64_t j = 0; j < n; ++j) {
          const std::byte* row = pv.rows.pages[j / pv.rows.page_size] +
                                 (j % pv.rows.page_size) * pv.rows.token_stride + pv.offset;
          const float v = simd::kv_load_one<Kv>(reinterpret_cast<const Elem*>(row), c);
          s = simd::fma_one(w[i * ld + j], v, s);
        }
        out[i * d + c] = s;
      }
    }
  };
  int64_t i0 = 0;
  for (; i0 + kSumRows <= rows; i0 += kSumRows) row_block(std::integral_constant<int, kSumRows>{}, i0);
  for (; i0 < rows; ++i0) row_block(std::integral_constant<int, 1>{}, i0);
}

}  // namespace rpa
