#include "kernel/jax_kernel.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "core/float32_scalar.h"
#include "core/flush_subnormals.h"
#include "core/paged_kv_view.h"
#include "kernel/kv_rows.h"
#include "kernel/panel_gemm.h"
#include "kernel/simd.h"
#include "schedule/jax_program.h"

namespace rpa {
namespace {

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
void to_float(DType t, const std::byte* src, int64_t n, float* dst) {
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

KvKind kv_kind(DType t) {
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

// The literal schedule's worker (DESIGN.md section 5): the TPU's KV double buffer in the KV
// dtype, filled by the Pallas program's DMAs, and m, l and the accumulator carried across
// grid cells from NaN (TPU interpret mode's uninitialized scratch).
class LiteralWorker : public BlockMath {
 public:
  LiteralWorker(const Inputs& in, const Params& p, const KernelPlan& plan, Tensor& out)
      : BlockMath(PagedKvView(in), attention_math(p), plan, /*literal=*/true,
                  plan.blocks.queries_per_block),
        in_(in),
        out_(out),
        slot_bytes_(hc_blk_ * d_ * kv_bytes_),
        kv_buf_(static_cast<size_t>(2 * kv_per_blk_ * slot_bytes_)),
        pages_(static_cast<size_t>(2 * bkv_)) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::fill(m_.begin(), m_.end(), nan);
    std::fill(l_.begin(), l_.end(), nan);
    std::fill(acc_.begin(), acc_.end(), nan);
    for (int64_t half = 0; half < 2; ++half) {
      for (int64_t i = 0; i < bkv_; ++i) {
        pages_[static_cast<size_t>(half * bkv_ + i)] =
            kv_buf_.data() + (half * kv_per_blk_ + i * view_.page_size()) * slot_bytes_;
      }
    }
  }

  void dma(int half, const KvBlockId& id) { copy_kv_block(id, half); }
  void step(int64_t heads_blk, int64_t q_blk, int64_t s, int64_t kv_blk, int half,
            int64_t store_lo, int64_t store_hi) {
    if (store_lo >= store_hi) return;  // every store of the step is masked out
    const int64_t r0 = q_blk * bq_;
    const KvRows src{.pages = pages_.data() + half * bkv_,
                     .page_size = view_.page_size(),
                     .token_stride = slot_bytes_};
    load_q(heads_blk, r0 + store_lo, r0 + store_hi);
    block(s, r0 + store_lo, r0 + store_hi, r0, kv_blk, kv_blk == 0, src);
  }
  // The Pallas kernel writes its whole query block from the accumulator, rows it did not
  // compute in this grid cell included.
  void cell_end(int64_t heads_blk, int64_t q_blk) {
    const int64_t r0 = q_blk * bq_;
    store(out_, heads_blk, acc_.data(), r0, r0, std::min(r0 + bq_, in_.q.dim(0)));
  }

 private:
  // The TPU's MultiPageAsyncCopyDescriptor: bkv pages of block id's combined heads into one
  // half of the double buffer; page slots past the sequence's last page copy its first page
  // (dma_page_column). A page index in [-P, 0) is read from the end, as TPU interpret
  // mode's numpy indexing does (jax mode accepts it; strict mode does not).
  void copy_kv_block(const KvBlockId& id, int64_t half) {
    const int64_t S = view_.page_size();
    const int64_t P = in_.kv_pages.dim(0);
    const int64_t page_bytes = S * view_.num_kv_heads() * 2 * d_ * kv_bytes_;
    std::byte* dst = kv_buf_.data() + half * kv_per_blk_ * slot_bytes_;
    for (int64_t i = 0; i < bkv_; ++i) {
      const int64_t column = dma_page_column(in_, bkv_, id, i);
      int64_t page = in_.page_indices.int_at(id.seq * view_.pages_per_seq() + column);
      if (page < 0) page += P;
      if (page < 0 || page >= P) throw std::out_of_range("tiled_attention: page index out of range (validate first)");
      const std::byte* src = in_.kv_pages.data() + page * page_bytes +
                             id.heads_blk * slot_bytes_;
      for (int64_t slot = 0; slot < S; ++slot) {
        std::memcpy(dst + (i * S + slot) * slot_bytes_, src + slot * page_bytes / S,
                    static_cast<size_t>(slot_bytes_));
      }
    }
  }

  const Inputs& in_;
  Tensor& out_;
  const int64_t slot_bytes_;
  Scratch<std::byte> kv_buf_;  // [2, bkv, S, Hc_blk, D] in the KV dtype
  std::vector<const std::byte*> pages_;  // [2, bkv]: each half's pages in the buffer
};

// Runs a LiteralWorker through the Pallas program's walk.
class LiteralProgram : public PallasProgramVisitor {
 public:
  explicit LiteralProgram(LiteralWorker& worker) : worker_(worker) {}
  void dma(int buf, const KvBlockId& id) override { worker_.dma(buf, id); }
  void step(int64_t hb, int64_t qb, int64_t seq, int64_t kv_blk, int buf, int64_t store_lo,
            int64_t store_hi, int pending) override {
    // The program never waits on a buffer no DMA was started into (schedule/jax_program.h).
    if (pending == 0) throw std::logic_error("tiled_attention: a wait with no DMA pending");
    worker_.step(hb, qb, seq, kv_blk, buf, store_lo, store_hi);
  }
  void cell_end(int64_t hb, int64_t qb) override { worker_.cell_end(hb, qb); }

 private:
  LiteralWorker& worker_;
};

// The default schedule's unit of work: a tile of one sequence's rows [a, b) in one heads
// block, and
// the KV blocks [kb_begin, kb_end) that can weigh anything for them (with exact skips, the
// blocks after the last row's position and before the first row's window are left out:
// each of their weights is exp(mask - m) = 0 against a row's real maximum, which a kept
// block supplies). The blocks are cut into `chunks` runs of chunk_blocks, computed
// independently and merged in order. Heads share only the pass over a page, never
// arithmetic, so which heads a segment takes changes no bit; it takes them through a plan of
// its own (heads_blk indexes that plan's heads blocks):
// - a decode sequence (at most kFewRows rows per kv head) every head at once (all_heads),
//   so that a page's token records are read whole, front to back, which the hardware
//   prefetchers follow;
// - any other a single kv head, so that a prefill's tiles split into as many tasks as it has
//   kv heads (each head's K and V rows are widened once per tile either way).
struct Segment {
  int64_t heads_blk, seq, a, b, kb_begin, kb_end, chunk_blocks, chunks;
  bool all_heads;
  int64_t hq_blk;  // q heads the segment covers
  size_t partial;  // offset of the chunks' partial results (chunks > 1)
};

// Floats per chunk of a segment's partial results: m and l of each (row, q head), then its
// accumulator row of D.
int64_t partial_floats(const Segment& sg, int64_t d) {
  return (sg.b - sg.a) * sg.hq_blk * (d + 2);
}

// The plan with heads blocks of kv_heads kv heads each (the same KV and query blocks): every
// head (decode's segments) or one (the others').
KernelPlan heads_plan(const KernelPlan& plan, const PagedKvView& view, int64_t kv_heads) {
  KernelPlan out = plan;
  out.heads.q_heads = kv_heads * view.q_heads_per_kv();
  out.heads.combined_kv_heads = 2 * kv_heads;
  out.num_heads_blks = view.num_kv_heads() / kv_heads;
  return out;
}

// The default schedule's worker: reads each KV block in place from the paged cache.
class SegmentWorker : public BlockMath {
 public:
  SegmentWorker(const PagedKvView& view, const AttentionMath& math, const KernelPlan& plan,
                int64_t tile_queries)
      : BlockMath(view, math, plan, /*literal=*/false, tile_queries),
        pages_(static_cast<size_t>(bkv_)) {}

  // Chunk c of segment sg: its online softmax into m, l and the accumulator, then either
  // the output rows (one chunk) or the chunk's partial results.
  void run(const Segment& sg, int64_t c, Tensor& out, float* partial) {
    const int64_t b0 = sg.kb_begin + c * sg.chunk_blocks;
    const int64_t b1 = std::min(sg.kb_end, b0 + sg.chunk_blocks);
    load_q(sg.heads_blk, sg.a, sg.b);
    sink_chunk_ = c == 0;
    for (int64_t kv_blk = b0; kv_blk < b1; ++kv_blk) {
      block(sg.seq, sg.a, sg.b, sg.a, kv_blk, kv_blk == b0, pages_of(sg, kv_blk));
    }
    if (b0 >= b1) std::fill(acc_.begin(), acc_.end(), 0.0f);  // no block: nothing attended
    if (math_.out_scale) {  // v3's v_scale on p.V: on the chunk's result, which is linear in it
      const float scale = float32_scalar(*math_.out_scale);
      const int64_t n = (sg.b - sg.a) * hq_blk_ * d_;
      for (int64_t e = 0; e < n; ++e) acc_[static_cast<size_t>(e)] *= scale;
    }
    if (sg.chunks == 1) {
      store(out, sg.heads_blk, acc_.data(), sg.a, sg.a, sg.b);
      return;
    }
    const int64_t n = (sg.b - sg.a) * hq_blk_;
    float* pm = partial + c * partial_floats(sg, d_);
    float* pl = pm + n;
    float* po = pl + n;
    for (int64_t e = 0; e < n; ++e) {  // e = (r - a) * Hq_blk + h * group + g
      const int64_t h = e % hq_blk_ / group_;
      const int64_t i = e / hq_blk_ * group_ + e % group_;
      pm[e] = b0 < b1 ? m_[static_cast<size_t>(h * rows_max_ + i)] : -std::numeric_limits<float>::infinity();
      pl[e] = b0 < b1 ? l_[static_cast<size_t>(h * rows_max_ + i)] : 1.0f;
    }
    std::memcpy(po, acc_.data(), static_cast<size_t>(n * d_) * sizeof(float));
  }

 private:
  // Where the tokens of block kv_blk of the segment's sequence lie in the cache.
  KvRows pages_of(const Segment& sg, int64_t kv_blk) {
    const int64_t S = view_.page_size();
    const int64_t P = view_.num_pages();
    const int64_t token_bytes = view_.token_stride() * kv_bytes_;
    const int64_t valid = std::min(kv_per_blk_, view_.kv_len(sg.seq) - kv_blk * kv_per_blk_);
    const int64_t pages = exact_skips() ? (valid + S - 1) / S : bkv_;
    for (int64_t i = 0; i < pages; ++i) {
      const int64_t column = kv_blk * bkv_ + i;
      const int64_t page = column < view_.pages_per_seq() ? view_.page_of(sg.seq, column * S) : -1;
      // Strict validation keeps every page a token is read from in range; a page past
      // kv_len is never read (its slots are zero-filled slots, see BlockMath::block).
      if (i * S < valid && (page < 0 || page >= P)) {
        throw std::out_of_range("tiled_attention: page index out of range (validate first)");
      }
      pages_[static_cast<size_t>(i)] =
          i * S < valid ? view_.kv_data() + (page * S * token_bytes) +
                              sg.heads_blk * hkv_blk_ * head_bytes_
                        : nullptr;
    }
    return {.pages = pages_.data(), .page_size = S, .token_stride = token_bytes};
  }

  std::vector<const std::byte*> pages_;  // [bkv]
};

// The chunks of a split segment merged in order, as one more online-softmax step each:
// chunk c's rows weigh l_c * exp(m_c - m) against the running m.
void merge_chunks(const Segment& sg, const float* partial, int64_t d, const PagedKvView& view,
                  DType q_dtype, Tensor& out, std::vector<float>& o) {
  const int64_t hq_blk = sg.hq_blk;
  const int64_t n = (sg.b - sg.a) * hq_blk;
  const int64_t stride = partial_floats(sg, d);
  o.resize(static_cast<size_t>(d));
  for (int64_t e = 0; e < n; ++e) {
    float m = partial[e], l = partial[n + e];
    std::copy_n(partial + 2 * n + e * d, d, o.begin());
    for (int64_t c = 1; c < sg.chunks; ++c) {
      const float* pc = partial + c * stride;
      const float m_c = pc[e], l_c = pc[n + e];
      const float* o_c = pc + 2 * n + e * d;
      // A chunk of -inf logits alone weighs nothing (softmax_row): its o_c is 0.
      if (m_c == -std::numeric_limits<float>::infinity()) continue;
      const float m_next = std::isnan(m) ? m : std::isnan(m_c) ? m_c : std::max(m, m_c);
      const float alpha = std::exp(m - m_next);
      const float beta = std::exp(m_c - m_next) * l_c;
      const float l_alpha = alpha * l;
      const float l_next = l_alpha + beta;
      const float l_safe = l_next == 0.0f ? 1.0f : l_next;
      // As row_update computes it: beta * o_c fused onto l_alpha * o.
      for (int64_t k = 0; k < d; ++k) {
        float& x = o[static_cast<size_t>(k)];
        x = simd::fma_one(beta, o_c[k], l_alpha * x) / l_safe;
      }
      m = m_next;
      l = l_safe;
    }
    const int64_t r = sg.a + e / hq_blk;
    const int64_t dst = view.q_offset(r, sg.heads_blk * hq_blk + e % hq_blk);
    for (int64_t k = 0; k < d; ++k) store_float(q_dtype, out.data(), dst + k, o[static_cast<size_t>(k)]);
  }
}

// Query rows per tile of the default schedule: kTileRows rows of one kv head.
int64_t tile_queries(const PagedKvView& view) {
  return std::max<int64_t>(1, kTileRows / view.q_heads_per_kv());
}

// The default schedule's segments: heads blocks in order, then each sequence's rows in
// tiles of tile_queries, then its KV blocks in chunks. Everything here follows from the
// shape and the plan, never from the thread count.
std::vector<Segment> plan_segments(const PagedKvView& view, const AttentionMath& math,
                                   const KernelPlan& plan, bool exact_skips) {
  const int64_t tile = tile_queries(view);
  const int64_t kv_per_blk = plan.blocks.kv_pages_per_block * view.page_size();
  const int64_t chunk_blocks = std::max<int64_t>(1, (kSplitTokens + kv_per_blk - 1) / kv_per_blk);
  std::vector<Segment> out;
  for (int64_t hb = 0; hb < view.num_kv_heads(); ++hb) {
    for (int64_t s = 0; s < view.num_seqs(); ++s) {
      const bool all_heads = view.q_len(s) * view.q_heads_per_kv() <= kFewRows;
      if (all_heads && hb > 0) continue;  // the first pass took every head
      for (int64_t a = view.q_start(s); a < view.q_end(s); a += tile) {
        const int64_t b = std::min(view.q_end(s), a + tile);
        const int64_t kv_len = view.kv_len(s);
        const int64_t first_pos = view.q_position(s, a - view.q_start(s));
        const int64_t last_pos = view.q_position(s, b - 1 - view.q_start(s));
        int64_t kb_begin = -1, kb_end = 0;
        for (int64_t kb = 0; kb * kv_per_blk < kv_len; ++kb) {
          const int64_t kv_start = kb * kv_per_blk;
          const int64_t valid = std::min(kv_per_blk, kv_len - kv_start);
          // Every key of the block masked for every row: after the last row's position, or
          // before the first row's window.
          const bool all_masked =
              (math.causal && kv_start > last_pos) ||
              (math.sliding_window && kv_start + valid - 1 <= first_pos - *math.sliding_window);
          if (exact_skips && all_masked) continue;
          if (kb_begin < 0) kb_begin = kb;
          kb_end = kb + 1;
        }
        if (kb_begin < 0) kb_begin = kb_end = 0;
        const int64_t blocks = kb_end - kb_begin;
        // Only decode segments are split: a prefill's tiles and heads are tasks enough, and its
        // chunks' partial results (rows x heads x D each) would add up to gigabytes.
        const int64_t chunks = exact_skips && all_heads
                                   ? std::max<int64_t>(1, (blocks + chunk_blocks - 1) / chunk_blocks)
                                   : 1;
        out.push_back({.heads_blk = hb, .seq = s, .a = a, .b = b, .kb_begin = kb_begin,
                       .kb_end = kb_end,
                       .chunk_blocks = chunks == 1 ? std::max<int64_t>(blocks, 1) : chunk_blocks,
                       .chunks = chunks, .all_heads = all_heads,
                       .hq_blk = all_heads ? view.num_q_heads() : view.q_heads_per_kv(), .partial = 0});
      }
    }
  }
  return out;
}

// Runs body(worker_index) on `workers` threads, the calling thread included.
template <class F>
void on_threads(int workers, F&& body) {
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(std::max(0, workers - 1)));
  for (int w = 1; w < workers; ++w) threads.emplace_back(body);
  body();
  for (std::thread& t : threads) t.join();
}

}  // namespace

Tensor tiled_attention(const Inputs& in, const Params& p, const KernelOptions& options) {
  const KernelPlan plan =
      plan_kernel(in, p, options.target, options.literal_schedule && options.untuned_blocks);
  Tensor out(in.q.dtype(), in.q.shape());
  if (options.literal_schedule) {  // one thread: the grid cells run in order, as on the TPU
    const FlushSubnormals flush;
    LiteralWorker worker(in, p, plan, out);
    LiteralProgram program(worker);
    const PallasGrid grid{.num_heads_blks = plan.num_heads_blks,
                          .num_q_blks = plan.num_q_blks,
                          .kv_pages_per_block = plan.blocks.kv_pages_per_block,
                          .queries_per_block = plan.blocks.queries_per_block};
    if (!walk_pallas_program(in, grid, program, std::numeric_limits<int64_t>::max())) {
      throw std::invalid_argument("tiled_attention: the Pallas program does not end");
    }
    return out;
  }
  default_schedule(PagedKvView(in), attention_math(p), plan, options.threads, out);
  return out;
}

void default_schedule(const PagedKvView& view, const AttentionMath& math, const KernelPlan& plan,
                      int threads_wanted, Tensor& out) {
  // Every chunk of every segment is one task; a task's arithmetic does not depend on the
  // thread that runs it, and split segments are merged in chunk order afterwards.
  const bool exact = SegmentWorker(view, math, plan, 1).exact_skips();
  std::vector<Segment> segments = plan_segments(view, math, plan, exact);
  const int64_t d = view.head_dim();
  const KernelPlan all = heads_plan(plan, view, view.num_kv_heads());
  const KernelPlan one = heads_plan(plan, view, 1);
  std::vector<std::pair<size_t, int64_t>> tasks;
  std::vector<size_t> split;
  size_t partial_size = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    Segment& sg = segments[i];
    if (sg.chunks > 1) {
      sg.partial = partial_size;
      partial_size += static_cast<size_t>(sg.chunks * partial_floats(sg, d));
      split.push_back(i);
    }
    for (int64_t c = 0; c < sg.chunks; ++c) tasks.emplace_back(i, c);
  }
  // Costliest first, so that the last tasks to start are short (a prefill's tiles differ
  // up to its length in keys); the order changes who computes a task, never its bits. The
  // cost: rows times the keys the middle row attends within the chunk, times heads.
  const int64_t kv_per_blk = plan.blocks.kv_pages_per_block * view.page_size();
  auto cost = [&](const std::pair<size_t, int64_t>& t) {
    const Segment& sg = segments[t.first];
    const int64_t k0 = (sg.kb_begin + t.second * sg.chunk_blocks) * kv_per_blk;
    const int64_t k1 = std::min((sg.kb_begin + (t.second + 1) * sg.chunk_blocks) * kv_per_blk,
                                view.kv_len(sg.seq));
    const int64_t mid = view.q_position(sg.seq, (sg.a + sg.b) / 2 - view.q_start(sg.seq));
    return (sg.b - sg.a) * sg.hq_blk * std::clamp<int64_t>(mid + 1 - k0, 1, std::max<int64_t>(k1 - k0, 1));
  };
  std::stable_sort(tasks.begin(), tasks.end(),
                   [&](const auto& x, const auto& y) { return cost(x) > cost(y); });
  std::vector<float> partial(partial_size);
  // Scratch for the tallest tile of this call, per kind of segment (decode's are one row).
  int64_t tile = 1, all_tile = 1;
  for (const Segment& sg : segments) (sg.all_heads ? all_tile : tile) = std::max(sg.all_heads ? all_tile : tile, sg.b - sg.a);
  const int hw = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int threads = threads_wanted > 0 ? threads_wanted : hw;
  const auto workers =
      static_cast<int>(std::min<int64_t>(std::max<size_t>(tasks.size(), 1), threads));
  std::atomic<size_t> next{0};
  on_threads(workers, [&] {
    const FlushSubnormals flush;
    std::optional<SegmentWorker> blocks, every_head;  // made when first needed
    for (size_t t = next++; t < tasks.size(); t = next++) {
      const Segment& sg = segments[tasks[t].first];
      std::optional<SegmentWorker>& worker = sg.all_heads ? every_head : blocks;
      if (!worker) worker.emplace(view, math, sg.all_heads ? all : one, sg.all_heads ? all_tile : tile);
      worker->run(sg, tasks[t].second, out, partial.data() + sg.partial);
    }
  });
  std::atomic<size_t> next_split{0};
  on_threads(static_cast<int>(std::min<size_t>(std::max<size_t>(split.size(), 1), workers)), [&] {
    const FlushSubnormals flush;
    std::vector<float> o;
    for (size_t t = next_split++; t < split.size(); t = next_split++) {
      const Segment& sg = segments[split[t]];
      merge_chunks(sg, partial.data() + sg.partial, d, view, view.q_dtype(), out, o);
    }
  });
}

}  // namespace rpa
