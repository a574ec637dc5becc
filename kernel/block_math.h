// The arithmetic both tiled schedules share (DESIGN.md section 5): the float32 scratch, the
// KV element kinds the decode loops widen, and BlockMath, one KV block's logits, mask, soft cap
// and online-softmax update for a run of rows. The literal jax schedule (jax_kernel.cc) and the
// default schedule (default_schedule.cc) build their workers on it; nothing else includes it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "core/attention_math.h"
#include "core/float32_scalar.h"
#include "core/flush_subnormals.h"
#include "core/paged_kv_view.h"
#include "kernel/kv_rows.h"
#include "kernel/panel_gemm.h"
#include "kernel/simd.h"
#include "validation/kernel_plan.h"

namespace rpa::kernel_detail {

// Scratch: 64-byte aligned (Eigen's vector loops start at the first aligned element, so
// with the 16-byte alignment malloc gives, the order of a sum, and so its last bit, would
// follow the heap address from call to call) and left uninitialized (every element is
// written before it is read; zeroing megabytes per call cost decode a millisecond).
template <class T>
class Scratch {
  static_assert(std::is_trivially_default_constructible_v<T> && std::is_trivially_destructible_v<T>);

 public:
  explicit Scratch(size_t n)
      : n_(n), p_(static_cast<T*>(::operator new(std::max<size_t>(n, 1) * sizeof(T), std::align_val_t{64}))) {}
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { ::operator delete(p_, std::align_val_t{64}); }
  T* data() { return p_; }
  const T* data() const { return p_; }
  T* begin() { return p_; }
  T* end() { return p_ + n_; }
  T& operator[](size_t i) { return p_[i]; }

 private:
  size_t n_;
  T* p_;
};

// Up to this many rows (query rows x q heads per kv head) a block is a matrix-vector
// product in all but name: the decode loops (kernel/kv_rows.h) read each K and V row once,
// in place, instead of packing it for a GEMM.
constexpr int64_t kFewRows = kMaxFewRows;

// Rows of one GEMM panel in a prefill block. A panel's keys end at its last row's causal
// position, so the part of the triangle above the diagonal that a whole block would compute
// shrinks to at most a panel's height.
constexpr int64_t kPanelRows = 64;

// The default schedule's row tiles: a sequence's rows within a heads block are cut into
// tiles of about this many rows (query rows x q heads per kv head), one task each. Each KV
// block's K and V rows are widened once per tile and kv head, and its GEMMs are that tall;
// the TPU's query blocks (a few dozen rows) would widen them once per query block.
constexpr int64_t kTileRows = 512;

// The default schedule splits a decode sequence's KV range into chunks of whole KV blocks of at
// least this many tokens, computed in parallel and merged in order (flash-decoding). The
// split depends on the shape only, so the output bits do not depend on the thread count.
constexpr int64_t kSplitTokens = 1024;

// Bytes of K and V (every head of a heads block) per decode step: half of a 1 MiB L2.
constexpr int64_t kDecodeStepBytes = 512 * 1024;

// Reads n elements of a float dtype into float32 (bfloat16 by its bits, in a loop the
// compiler vectorizes).
inline void to_float(DType t, const std::byte* src, int64_t n, float* dst) {
  if (t == DType::kFloat32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  if (t == DType::kBFloat16) {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t bits;
      std::memcpy(&bits, src + 2 * i, sizeof bits);
      const uint32_t word = uint32_t{bits} << 16;
      std::memcpy(dst + i, &word, sizeof word);
    }
    return;
  }
  // float8, and in the literal schedule float16 and integer KV (is_pallas_extra_kv_dtype).
  for (int64_t i = 0; i < n; ++i) dst[i] = load_as_float32(t, src, i);
}

// The KV element types the decode loops widen in registers; kOther goes through a float32
// copy of the block's rows (float16 and integer KV, which only the literal schedule meets).
enum class KvKind { kF32, kBF16, kE4M3, kE5M2, kOther };

inline KvKind kv_kind(DType t) {
  switch (t) {
    case DType::kFloat32: return KvKind::kF32;
    case DType::kBFloat16: return KvKind::kBF16;
    case DType::kFloat8E4M3FN: return KvKind::kE4M3;
    case DType::kFloat8E5M2: return KvKind::kE5M2;
    default: return KvKind::kOther;
  }
}

// Calls f with the simd tag of a kind other than kOther.
template <class F>
void with_kv_tag(KvKind kind, F&& f) {
  switch (kind) {
    case KvKind::kF32: return f(simd::F32{});
    case KvKind::kBF16: return f(simd::BF16{});
    case KvKind::kE4M3: return f(simd::E4M3{});
    case KvKind::kE5M2: return f(simd::E5M2{});
    case KvKind::kOther: break;
  }
  throw std::logic_error("with_kv_tag: no vector load for this KV dtype");
}

// The arithmetic of one KV block, shared by both schedules: for the rows [a, b) of one
// sequence and every kv head of a heads block, logits, mask, soft cap and JAX's
// online-softmax update of m, l and the accumulator. Where the block's tokens lie is the
// caller's: in the paged cache (default schedule) or in the double buffer (literal). The
// float32 scratch is sized once for the plan; nothing is allocated per block.
class BlockMath {
  struct Scales {
    float l_alpha, beta, l_next_safe;
  };

 public:
  // tile_queries: the most query rows of one sequence that one call of block() takes.
  BlockMath(const PagedKvView& view, const AttentionMath& math, const KernelPlan& plan,
            bool literal, int64_t tile_queries)
      : view_(view),
        math_(math),
        q_dtype_(view.q_dtype()),
        kv_dtype_(view.kv_dtype()),
        kv_bytes_(dtype_size(kv_dtype_)),
        head_bytes_(view.head_stride() * kv_bytes_),
        v_bytes_(view.v_delta() * kv_bytes_),
        d_(view_.head_dim()),
        group_(view_.q_heads_per_kv()),
        hc_blk_(plan.heads.combined_kv_heads),
        hq_blk_(plan.heads.q_heads),
        hkv_blk_(hc_blk_ / 2),
        bkv_(plan.blocks.kv_pages_per_block),
        bq_(plan.blocks.queries_per_block),
        kv_per_blk_(bkv_ * view_.page_size()),
        tile_q_(tile_queries),
        rows_max_(tile_q_ * group_),
        wide_rows_(std::max(rows_max_, hkv_blk_ * kFewRows)),
        kv_ld_((kv_per_blk_ + simd::kLanes - 1) / simd::kLanes * simd::kLanes),
        k_(static_cast<size_t>(kv_per_blk_ * d_)),
        v_(static_cast<size_t>(kv_per_blk_ * d_)),
        q_(static_cast<size_t>(hkv_blk_ * rows_max_ * d_)),
        logits_(static_cast<size_t>(wide_rows_ * kv_ld_)),
        kt_(static_cast<size_t>(d_ * kv_ld_)),
        row_keys_(static_cast<size_t>(2 * rows_max_)),
        qkv_(static_cast<size_t>(wide_rows_ * d_)),
        m_(static_cast<size_t>(hkv_blk_ * rows_max_)),
        l_(static_cast<size_t>(hkv_blk_ * rows_max_)),
        acc_(static_cast<size_t>(tile_q_ * hq_blk_ * d_)),
        scales_(static_cast<size_t>(wide_rows_)),
        mask_value_(static_cast<float>(math.mask_value)),
        sm_scale_(static_cast<float>(math.logit_scale)),
        literal_(literal),
        exact_skips_(!literal && std::isfinite(mask_value_) &&
                     mask_value_ <= static_cast<float>(kMaxExactMaskValue)),
        kind_(kv_kind(kv_dtype_)),
        k_in_registers_(kind_ != KvKind::kOther && !math.k_scale),
        v_in_registers_(kind_ != KvKind::kOther && !math.v_scale),
        bf16_dots_(simd::kBf16Dot && q_dtype_ == DType::kBFloat16 && kind_ == KvKind::kBF16 &&
                   k_in_registers_ && !math.q_quant_scale),
        q_bits_(bf16_dots_ ? static_cast<size_t>(hkv_blk_ * rows_max_ * d_) : 0) {}

  bool exact_skips() const { return exact_skips_; }

  // q rows [a, b) of every q head of heads block heads_blk, as float32 for block().
  void load_q(int64_t heads_blk, int64_t a, int64_t b) {
    heads_blk_ = heads_blk;
    const int64_t rows = (b - a) * group_;
    for (int64_t h = 0; h < hkv_blk_; ++h) {
      const int64_t q_head0 = heads_blk * hq_blk_ + h * group_;
      for (int64_t r = a; r < b; ++r) {
        for (int64_t g = 0; g < group_; ++g) {
          const std::byte* src = view_.q_data() + view_.q_offset(r, q_head0 + g) * dtype_size(q_dtype_);
          const int64_t dst = ((h * rows) + (r - a) * group_ + g) * d_;
          to_float(q_dtype_, src, d_, q_.data() + dst);
          if (math_.q_quant_scale) quantize_q(q_.data() + dst);
          if (bf16_dots_) std::memcpy(q_bits_.data() + dst, src, static_cast<size_t>(d_) * 2);
        }
      }
    }
  }

  // One KV block (kv_blk of sequence s, its tokens where src says) for the sequence's rows
  // [a, b) (at most tile_queries, loaded by load_q), every kv head. m, l and the
  // accumulator rows are indexed from row r0. first: no earlier block contributed (JAX's
  // kv_blk_idx == 0 initialisation).
  void block(int64_t s, int64_t a, int64_t b, int64_t r0, int64_t kv_blk, bool first,
             const KvRows& src) {
    const int64_t kv_start = kv_blk * kv_per_blk_;
    const int64_t valid = std::min(kv_per_blk_, view_.kv_len(s) - kv_start);
    const int64_t rows = (b - a) * group_;
    const int64_t q_pos0 = view_.q_position(s, a - view_.q_start(s));
    const int64_t last_pos = q_pos0 + (b - a) - 1;
    // With exact skips only the valid slots take part (a padded slot's logit is exactly
    // mask_value and its weight exactly 0, see the default schedule), and keys after the
    // last row's position are left out too: they are masked for every row (prefill's causal
    // triangle). Otherwise, as on the TPU, every slot of the block takes part, zero-filled
    // past kv_len: its logit is q . 0 before the mask (zero_slot_logit) and its V row adds
    // nothing.
    const int64_t nk = !exact_skips_   ? kv_per_blk_
                       : math_.causal ? std::min(valid, last_pos + 1 - kv_start)
                                      : valid;
    // Slots with a token's K and V (none when the literal schedule's int32 walk wraps past
    // kv_len).
    const int64_t n_data = std::clamp<int64_t>(valid, 0, nk);
    const BlockRows br{.a = a, .r0 = r0, .rows = rows, .q_pos0 = q_pos0, .kv_start = kv_start,
                       .nk = nk, .n_data = n_data, .first = first};
    if (rows <= kFewRows && exact_skips_) {
      // Decode steps the online softmax over sub-blocks whose K and V rows (every head of
      // the heads block) fit in L2: each byte then comes from memory once, the V rows
      // prefetched with the K rows, instead of once for K and again for V after the whole
      // block's softmax. Each step is the block update on fewer keys (the same as a smaller
      // KV block), so only the rounding of the running m, l and accumulator changes.
      const int64_t S = view_.page_size();
      const int64_t token_bytes = hc_blk_ * d_ * kv_bytes_;
      const int64_t sub = std::max<int64_t>(1, kDecodeStepBytes / token_bytes / S) * S;
      for (int64_t j0 = 0; j0 < nk; j0 += sub) {
        BlockRows part = br;
        part.kv_start = kv_start + j0;
        part.nk = std::min(sub, nk - j0);
        part.n_data = part.nk;  // exact skips: nk <= valid
        part.first = first && j0 == 0;
        const KvRows part_src{.pages = src.pages + j0 / S, .page_size = S, .token_stride = src.token_stride};
        few_rows_block(part, part_src, nk - j0);
      }
    } else if (rows <= kFewRows) {
      few_rows_block(br, src, n_data);
    } else {
      for (int64_t h = 0; h < hkv_blk_; ++h) gemm_block(br, h, src);
    }
  }

 protected:
  struct BlockRows {
    int64_t a, r0, rows, q_pos0, kv_start, nk, n_data;
    bool first;
  };

  float* m_of(int64_t h, const BlockRows& br) {
    return m_.data() + h * rows_max_ + (br.a - br.r0) * group_;
  }
  float* l_of(int64_t h, const BlockRows& br) {
    return l_.data() + h * rows_max_ + (br.a - br.r0) * group_;
  }

  // Decode: every head's logits first, page by page, so a page's rows of all the heads are
  // read while it is in cache; then the softmax; then the weighted V rows, page by page.
  // ahead: tokens of src (>= br.n_data) whose pages the loops may ask for ahead.
  void few_rows_block(const BlockRows& br, const KvRows& src, int64_t ahead) {
    const int rows = static_cast<int>(br.rows);
    const int64_t nk = br.nk, n = br.n_data;
    const int64_t stride = src.token_stride;
    float* const lg = logits_.data();  // head h, row i: lg + (h * rows + i) * nk
    if (k_in_registers_) {
      with_kv_tag(kind_, [&](auto tag) {
        using Kv = decltype(tag);
        const kv_rows_detail::HeadsLayout heads{.heads = hkv_blk_,
                                                .head_bytes = head_bytes_,
                                                .q_head = rows * d_,
                                                .out_head = rows * nk};
        for_each_kv_page(src, n, ahead, [&](const std::byte* page, int64_t j0, int64_t count,
                                            const std::byte* next, int64_t next_count) {
#if defined(__AVX512BF16__) && defined(__AVX512F__)
          if (bf16_dots_) {
            few_row_dots_bf16(q_bits_.data(), rows, d_, page, 0, stride, count, lg + j0, nk, next,
                              next_count, heads);
            return;
          }
#endif
          few_row_dots<Kv>(q_.data(), rows, d_, page, 0, stride, count, lg + j0, nk, next,
                           next_count, heads);
        });
      });
    } else {
      for (int64_t h = 0; h < hkv_blk_; ++h) {
        gather(src, h, /*value=*/false, n, k_.data());
        few_row_dots<simd::F32>(q_.data() + h * rows * d_, rows, d_,
                                reinterpret_cast<const std::byte*>(k_.data()), 0,
                                d_ * static_cast<int64_t>(sizeof(float)), n,
                                lg + h * rows * nk, nk);
      }
    }
    for (int64_t h = 0; h < hkv_blk_; ++h) {
      for (int64_t i = 0; i < rows; ++i) {
        float* x = lg + (h * rows + i) * nk;
        std::fill(x + n, x + nk, zero_slot_logit(q_.data() + (h * rows + i) * d_));
        softmax_row(x, nk, br, h, i, m_of(h, br), l_of(h, br), scales_[static_cast<size_t>(h * rows + i)]);
      }
    }
    float* const pv = qkv_.data();  // head h, row i: pv + (h * rows + i) * d
    std::fill(pv, pv + hkv_blk_ * rows * d_, 0.0f);
    if (v_in_registers_) {
      with_kv_tag(kind_, [&](auto tag) {
        using Kv = decltype(tag);
        for_each_kv_page(src, n, [&](const std::byte* page, int64_t j0, int64_t count,
                                     const std::byte*, int64_t) {
          for (int64_t h = 0; h < hkv_blk_; ++h) {
            few_row_axpy<Kv>(lg + h * rows * nk + j0, rows, nk, page, h * head_bytes_ + v_bytes_,
                             stride, count, d_, pv + h * rows * d_);
          }
        });
      });
    } else {
      for (int64_t h = 0; h < hkv_blk_; ++h) {
        gather(src, h, /*value=*/true, n, v_.data());
        few_row_axpy<simd::F32>(lg + h * rows * nk, rows, nk,
                                reinterpret_cast<const std::byte*>(v_.data()), 0,
                                d_ * static_cast<int64_t>(sizeof(float)), n, d_, pv + h * rows * d_);
      }
    }
    for (int64_t h = 0; h < hkv_blk_; ++h) {
      update_acc(br, h, pv + h * rows * d_, scales_.data() + h * rows);
    }
  }

  // Prefill: one kv head's block through the register-tiled products of panel_gemm.h, a
  // panel of rows at a time (its logits stay in L2 between the two products). Where skips
  // are exact each row's keys end at its causal position; otherwise every slot of the
  // block takes part, zero-filled past kv_len.
  void gemm_block(const BlockRows& br, int64_t h, const KvRows& src) {
    const int64_t rows = br.rows, nk = br.nk, n = br.n_data;
    // K transposed from where it lies, widened as it is read; with a scale (or K that the
    // einsum promotes), through float32 rows of its effective values first.
    const int64_t ldk = kv_ld_;
    const int64_t f32_row = d_ * static_cast<int64_t>(sizeof(float));
    const std::byte* const k_rows = reinterpret_cast<const std::byte*>(k_.data());
    const std::byte* const v_rows = reinterpret_cast<const std::byte*>(v_.data());
    const PagedV k_in_place{src, h * head_bytes_};
    const PagedV k_copy{{&k_rows, std::max<int64_t>(n, 1), f32_row}, 0};
    const PagedV v_copy{{&v_rows, std::max<int64_t>(n, 1), f32_row}, 0};
    if (k_in_registers_) {
      with_kv_tag(kind_, [&](auto tag) { transpose_keys<decltype(tag)>(k_in_place, n, d_, kt_.data(), ldk); });
    } else {
      gather(src, h, /*value=*/false, n, k_.data());
      transpose_keys<simd::F32>(k_copy, n, d_, kt_.data(), ldk);
    }
    // V as float32 rows, contiguous: the weighted sum sweeps all of a block's V rows for every
    // few rows of the panel, and rows a token record apart would each cost a TLB entry.
    gather(src, h, /*value=*/true, n, v_.data());
    int64_t* const keys = row_keys_.data();       // softmax length of each row
    int64_t* const data_keys = keys + rows_max_;  // ... of those, keys with K and V
    for (int64_t i = 0; i < rows; ++i) {
      keys[i] = exact_skips_ && math_.causal
                    ? std::clamp<int64_t>(br.q_pos0 + i / group_ + 1 - br.kv_start, 1, nk)
                    : nk;
      data_keys[i] = std::min(keys[i], n);
    }
    float* const lg = logits_.data();  // row i: lg + i * ldk
    float* const pv = qkv_.data();     // row i: pv + i * d
    const float* q = q_.data() + h * rows * d_;
    for (int64_t i0 = 0; i0 < rows; i0 += kPanelRows) {
      const int64_t pr = std::min(kPanelRows, rows - i0);
      panel_logits(q + i0 * d_, pr, d_, kt_.data(), ldk, data_keys + i0, lg + i0 * ldk, ldk);
      for (int64_t i = i0; i < i0 + pr; ++i) {
        float* x = lg + i * ldk;
        std::fill(x + data_keys[i], x + keys[i], zero_slot_logit(q + i * d_));
        softmax_row(x, keys[i], br, h, i, m_of(h, br), l_of(h, br), scales_[static_cast<size_t>(i)]);
        // The weighted sum runs each register tile of rows to its last row's keys.
        const int64_t sum_keys = weighted_sum_keys(data_keys + i0, pr, i - i0);
        if (sum_keys > keys[i]) std::fill(x + keys[i], x + sum_keys, 0.0f);
      }
      panel_weighted_sum<simd::F32>(lg + i0 * ldk, ldk, pr, data_keys + i0, v_copy, d_, pv + i0 * d_);
    }
    update_acc(br, h, pv, scales_.data());
  }

  // The logit of a zero-filled slot (K = 0, past kv_len) for the query row q: q . 0, which is
  // 0, or NaN where q holds an infinity or a NaN, as the TPU's dot over the zeroed slot gives.
  float zero_slot_logit(const float* q) const {
    for (int64_t c = 0; c < d_; ++c) {
      if (!std::isfinite(q[c])) return std::numeric_limits<float>::quiet_NaN();
    }
    return 0.0f;
  }

  // Row i of local kv head h: its logits x[0, n) of this block: scale, soft cap, mask, and
  // the update of the row's m and l; x becomes the row's weights exp(x - m_curr).
  void softmax_row(float* xp, int64_t n, const BlockRows& br, int64_t h, int64_t i, float* m,
                   float* l, Scales& sc) const {
    Eigen::Map<Eigen::ArrayXf> x(xp, n);
    x *= sm_scale_;
    if (math_.soft_cap) {
      const auto cap = static_cast<float>(*math_.soft_cap);
      x = cap * (x / cap).tanh();
    }
    // Keys t with q_pos - W < t (and t <= q_pos under the causal mask) are visible; the mask
    // value is added to (jax) or replaces (v3) the others' logits elsewhere.
    const int64_t q_pos = br.q_pos0 + i / group_;
    const int64_t lo = math_.sliding_window ? q_pos - *math_.sliding_window + 1 - br.kv_start : 0;
    const int64_t hi = math_.causal ? q_pos + 1 - br.kv_start : n;
    const auto mask = [&](int64_t j) { x[j] = math_.mask_replaces ? mask_value_ : x[j] + mask_value_; };
    for (int64_t j = 0; j < std::min(std::max<int64_t>(lo, 0), n); ++j) mask(j);
    for (int64_t j = std::max<int64_t>(hi, 0); j < n; ++j) mask(j);
    const float m_curr = x.maxCoeff<Eigen::PropagateNaN>();
    // A block whose logits are all -inf (an infinite q or K, no cap) weighs nothing in the
    // definition, whatever the rest of the row: its weights are 0, not exp(-inf - -inf) =
    // NaN as in the Pallas program's local-max update, which the literal schedule keeps
    // (fuzz_raw_inputs found an hd64 row of one -inf logit beside a finite sink: the
    // definition 0, the kernel NaN). A row of -inf logits alone, no sink, then gives 0 where
    // the definition gives 0 / 0.
    const float kMinusInf = -std::numeric_limits<float>::infinity();
    const bool nothing = !literal_ && m_curr == kMinusInf;
    if (nothing) {
      x.setZero();
    } else {
      x = (x - m_curr).exp();
    }
    const float l_curr = x.sum();
    // The sink starts the online softmax of the sequence's first chunk as a block of one
    // logit with no value: m = sink, l = 1, the accumulator 0.
    const bool sink = br.first && math_.sink != nullptr && sink_chunk_;
    const float m_prev = !br.first ? m[i]
                         : sink    ? math_.sink[heads_blk_ * hq_blk_ + h * group_ + i % group_]
                                   : -std::numeric_limits<float>::infinity();
    const float l_prev = !br.first ? l[i] : sink ? 1.0f : 0.0f;
    const float m_next = std::isnan(m_prev)   ? m_prev
                         : std::isnan(m_curr) ? m_curr
                                              : std::max(m_prev, m_curr);
    // m_prev == m_next == -inf only after nothing: l_prev is 0 then, and alpha any finite.
    const float alpha = nothing && m_prev == kMinusInf ? 1.0f : std::exp(m_prev - m_next);
    const float beta = nothing ? 0.0f : std::exp(m_curr - m_next);
    const float l_alpha = alpha * l_prev;
    const float l_next = l_alpha + beta * l_curr;
    m[i] = m_next;
    l[i] = l_next == 0.0f ? 1.0f : l_next;
    sc = {l_alpha, beta, l[i]};
  }

  // acc = (l_alpha * acc + beta * pv) / l_next for the rows of kv head h.
  void update_acc(const BlockRows& br, int64_t h, const float* pv, const Scales* scales) {
    for (int64_t i = 0; i < br.rows; ++i) {
      const int64_t r = br.a + i / group_;
      const int64_t g = i % group_;
      float* o = acc_.data() + ((r - br.r0) * hq_blk_ + h * group_ + g) * d_;
      const float* add = pv + i * d_;
      const Scales& sc = scales[i];
      row_update(o, add, br.first ? 0.0f : 1.0f, sc);
    }
  }

  // o = (l_alpha * o + beta * add) / l_next over one accumulator row; keep 0: the first
  // block, whose o is not read (o_curr = 0). Vectors of the build's width, then the tail of
  // head_dim one element at a time (each element always takes the same one of the two).
  void row_update(float* o, const float* add, float keep, const Scales& sc) const {
    constexpr int L = simd::kLanes;
    const int64_t dv = d_ - d_ % L;
    const simd::Vec a = simd::set1(sc.l_alpha), b = simd::set1(sc.beta), l = simd::set1(sc.l_next_safe);
    if (keep == 0.0f) {
      for (int64_t c = 0; c < dv; c += L) simd::store(o + c, simd::div(simd::mul(b, simd::load(add + c)), l));
      for (int64_t c = dv; c < d_; ++c) o[c] = (sc.beta * add[c]) / sc.l_next_safe;
      return;
    }
    for (int64_t c = 0; c < dv; c += L) {
      const simd::Vec t = simd::fma(b, simd::load(add + c), simd::mul(a, simd::load(o + c)));
      simd::store(o + c, simd::div(t, l));
    }
    for (int64_t c = dv; c < d_; ++c) {
      o[c] = simd::fma_one(sc.beta, add[c], sc.l_alpha * o[c]) / sc.l_next_safe;
    }
  }

  // K or V of local kv head h for the first n tokens of the block, as float32 rows of d,
  // scaled as the definition says.
  void gather(const KvRows& src, int64_t h, bool value, int64_t n, float* dst) const {
    for_each_kv_page(src, n, [&](const std::byte* page, int64_t j0, int64_t count,
                                 const std::byte*, int64_t) {
      for (int64_t t = 0; t < count; ++t) {
        gather_row(page + t * src.token_stride, h, value, dst + (j0 + t) * d_);
      }
    });
  }

  // One token's K or V row of local kv head h (token at `token`) into d float32.
  void gather_row(const std::byte* token, int64_t h, bool value, float* row) const {
    const std::optional<double>& scale = value ? math_.v_scale : math_.k_scale;
    to_float(kv_dtype_, token + h * head_bytes_ + (value ? v_bytes_ : 0), d_, row);
    if (scale || (!value && q_dtype_ == DType::kBFloat16 && dtype_is_integer(kv_dtype_))) {
      for (int64_t c = 0; c < d_; ++c) row[c] = kv_eff(q_dtype_, kv_dtype_, scale, !value, row[c]);
    }
  }

  // Rows [a, b) of the accumulator (indexed from r0) into o, in q's dtype.
  void store(Tensor& out, int64_t heads_blk, const float* acc, int64_t r0, int64_t a,
             int64_t b) const {
    for (int64_t r = a; r < b; ++r) {
      for (int64_t hq = 0; hq < hq_blk_; ++hq) {
        const int64_t dst = view_.q_offset(r, heads_blk * hq_blk_ + hq);
        const float* src = acc + ((r - r0) * hq_blk_ + hq) * d_;
        if (q_dtype_ == DType::kFloat32) {
          std::memcpy(out.data() + dst * 4, src, static_cast<size_t>(d_) * sizeof(float));
          continue;
        }
        if (q_dtype_ == DType::kBFloat16) {
          auto* o = reinterpret_cast<uint16_t*>(out.data()) + dst;
          int64_t c = 0;
          for (; c + simd::kLanes <= d_; c += simd::kLanes) simd::store_bf16(o + c, simd::load(src + c));
          for (; c < d_; ++c) o[c] = float_to_bf16(src[c]);
          continue;
        }
        for (int64_t c = 0; c < d_; ++c) store_float(q_dtype_, out.data(), dst + c, src[c]);
      }
    }
  }

  // q (one row of D floats) quantized as v3's q_scale does (AttentionMath::q_quant_scale):
  // q / q_scale in q's dtype, where JAX takes the Python float as a weakly typed scalar of q's
  // dtype first (bfloat16(0.3) for bfloat16 queries).
  void quantize_q(float* row) const {
    const double scale = round_double_to(q_dtype_, *math_.q_quant_scale);
    const double top = kv_finite_max_;
    for (int64_t c = 0; c < d_; ++c) {
      const double x = round_double_to(q_dtype_, static_cast<double>(row[c]) / scale);
      row[c] = round_double_to(kv_dtype_, std::clamp(x, -top, top));
    }
  }

  const PagedKvView view_;
  const AttentionMath math_;
  const DType q_dtype_, kv_dtype_;
  const int64_t kv_bytes_, head_bytes_, v_bytes_, d_, group_, hc_blk_, hq_blk_, hkv_blk_, bkv_, bq_, kv_per_blk_,
      tile_q_, rows_max_, wide_rows_, kv_ld_;
  Scratch<float> k_, v_;    // [bkv * S, D]: a block's rows of one head as float32 (GEMMs)
  Scratch<float> q_;        // [Hkv_blk, rows, D]
  Scratch<float> logits_;   // decode [Hkv_blk, rows, nk]; prefill [rows, kv_ld]: then weights
  Scratch<float> kt_;       // [D, kv_ld]: a block's K rows of one head, transposed (prefill)
  Scratch<int64_t> row_keys_;  // [2, rows]: each prefill row's keys, and those with data
  Scratch<float> qkv_;      // decode [Hkv_blk, rows, D]; prefill [rows, D]
  Scratch<float> m_, l_;    // [Hkv_blk, bq * group]
  Scratch<float> acc_;      // [bq, Hq_blk, D]
  Scratch<Scales> scales_;  // this KV block's update of each row
  const float mask_value_, sm_scale_;
  // Padded slots and fully masked blocks weigh exactly 0 (mask_value <= -1e30, what strict
  // validation requires), so they may be left out; -inf or a small mask keeps the TPU's
  // full computation, NaN included.
  const bool literal_;
  const bool exact_skips_;
  const KvKind kind_;
  const bool k_in_registers_, v_in_registers_;  // no scale: the decode loops widen K / V
  // bfloat16 q and K, and the BF16 dot instruction: decode's logits from the bits directly.
  const bool bf16_dots_;
  Scratch<uint16_t> q_bits_;  // [Hkv_blk, rows, D]: q_'s bfloat16 bits (bf16_dots_)
  const double kv_finite_max_ = dtype_finite_max(kv_dtype_);
  int64_t heads_blk_ = 0;    // the heads block load_q loaded
  bool sink_chunk_ = true;   // the block with first set starts the sequence (the sink's chunk)
};

}  // namespace rpa::kernel_detail
