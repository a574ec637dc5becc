#include "kernel/tiled_kernel.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <thread>
#include <vector>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include <Eigen/Core>

#include "kernel/paged_kv_view.h"
#include "kernel/pallas_program.h"

namespace rpa {
namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Map = Eigen::Map<RowMajor>;

// Scratch is 64-byte aligned: Eigen's vector loops start at the first aligned element, so
// with the 16-byte alignment malloc gives, the order of a sum (and so its last bit) would
// follow the heap address from call to call.
template <class T>
struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <class U>
  explicit Aligned64(const Aligned64<U>&) {}
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{64}));
  }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t{64}); }
  friend bool operator==(const Aligned64&, const Aligned64&) { return true; }
};

template <class T>
using Scratch = std::vector<T, Aligned64<T>>;

// Up to this many rows (query rows x q heads per kv head) a block is a matrix-vector
// product in all but name.
constexpr int64_t kFewRows = 8;

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

// One worker's scratch, sized once for the plan: the TPU's VMEM buffers (the KV double
// buffer in the KV dtype, m, l and the accumulator in float32) and the float32 tiles the
// MXU would see. Nothing is allocated inside the grid loop.
class CellWorker {
  struct Scales {
    float l_alpha, beta, l_next_safe;
  };

 public:
  CellWorker(const Inputs& in, const Params& p, const KernelPlan& plan, bool literal, Tensor& out)
      : in_(in),
        p_(p),
        view_(in),
        out_(out),
        q_dtype_(in.q.dtype()),
        kv_dtype_(in.kv_pages.dtype()),
        kv_bytes_(dtype_size(kv_dtype_)),
        d_(view_.head_dim()),
        group_(view_.q_heads_per_kv()),
        hc_blk_(plan.heads.combined_kv_heads),
        hq_blk_(plan.heads.q_heads),
        hkv_blk_(hc_blk_ / 2),
        bkv_(plan.blocks.kv_pages_per_block),
        bq_(plan.blocks.queries_per_block),
        kv_per_blk_(bkv_ * view_.page_size()),
        rows_max_(bq_ * group_),
        kv_buf_(static_cast<size_t>(2 * kv_per_blk_ * hc_blk_ * d_ * kv_bytes_)),
        k_(static_cast<size_t>(kv_per_blk_ * d_)),
        v_(static_cast<size_t>(kv_per_blk_ * d_)),
        q_(static_cast<size_t>(rows_max_ * d_)),
        logits_(static_cast<size_t>(rows_max_ * kv_per_blk_)),
        qkv_(static_cast<size_t>(rows_max_ * d_)),
        m_(static_cast<size_t>(hkv_blk_ * rows_max_)),
        l_(static_cast<size_t>(hkv_blk_ * rows_max_)),
        acc_(static_cast<size_t>(bq_ * hq_blk_ * d_)),
        scales_(static_cast<size_t>(rows_max_)),
        mask_value_(static_cast<float>(p.effective_mask_value())),
        sm_scale_(static_cast<float>(p.sm_scale)),
        exact_skips_(!literal && std::isfinite(mask_value_) &&
                     mask_value_ <= static_cast<float>(kMaxExactMaskValue)),
        direct_f32_(kv_dtype_ == DType::kFloat32 && !p.k_scale && !p.v_scale) {
    if (literal) {  // TPU interpret mode's uninitialized scratch
      const float nan = std::numeric_limits<float>::quiet_NaN();
      std::fill(m_.begin(), m_.end(), nan);
      std::fill(l_.begin(), l_.end(), nan);
      std::fill(acc_.begin(), acc_.end(), nan);
    }
  }

  void run(int64_t heads_blk, int64_t q_blk) {  // the default schedule's grid cell
    const int64_t r0 = q_blk * bq_;
    const int64_t r1 = std::min(r0 + bq_, in_.q.dim(0));
    std::fill(acc_.begin(), acc_.end(), 0.0f);
    // Sequences overlapping rows [r0, r1): the first whose rows end after r0, onward.
    int64_t s = first_sequence_ending_after(r0);
    for (; s < view_.num_seqs() && view_.q_start(s) < r1; ++s) {
      if (view_.q_len(s) > 0) sequence(heads_blk, s, r0, r1);
    }
    store(heads_blk, r0, r1);
  }

  // The literal schedule's steps, as the Pallas program runs them (pallas_program.h).
  void dma(int half, const KvBlockId& id) { copy_kv_block(id, half); }
  void literal_step(int64_t heads_blk, int64_t q_blk, int64_t s, int64_t kv_blk, int half,
                    int64_t store_lo, int64_t store_hi) {
    if (store_lo >= store_hi) return;  // every store of the step is masked out
    const int64_t r0 = q_blk * bq_;
    const std::byte* buf = kv_buf_.data() + half * kv_per_blk_ * hc_blk_ * d_ * kv_bytes_;
    for (int64_t h = 0; h < hkv_blk_; ++h) {
      flash(heads_blk, h, s, r0 + store_lo, r0 + store_hi, r0, kv_blk, kv_blk == 0, buf);
    }
  }
  // The Pallas kernel writes its whole query block from the accumulator, rows it did not
  // compute in this grid cell included.
  void literal_cell_end(int64_t heads_blk, int64_t q_blk) {
    const int64_t r0 = q_blk * bq_;
    store(heads_blk, r0, std::min(r0 + bq_, in_.q.dim(0)));
  }

 private:
  int64_t first_sequence_ending_after(int64_t row) const {
    int64_t lo = 0, hi = view_.num_seqs();
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (view_.q_end(mid) > row) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    return lo;
  }

  void sequence(int64_t heads_blk, int64_t s, int64_t r0, int64_t r1) {
    const int64_t a = std::max(view_.q_start(s), r0);  // this block's rows of the sequence
    const int64_t b = std::min(view_.q_end(s), r1);
    const int64_t kv_len = view_.kv_len(s);
    const int64_t first_pos = view_.q_position(s, a - view_.q_start(s));
    last_pos_ = view_.q_position(s, b - 1 - view_.q_start(s));
    const int64_t last_pos = last_pos_;
    bool started = false;
    for (int64_t kv_blk = 0; kv_blk * kv_per_blk_ < kv_len; ++kv_blk) {
      const int64_t kv_start = kv_blk * kv_per_blk_;
      const int64_t valid = std::min(kv_per_blk_, kv_len - kv_start);
      // Exact skip: every key of the block is masked for every row (after the last row's
      // position, or before the first row's window), so its weight is exp(mask - m) = 0
      // against each row's real maximum, which another block supplies; a block processed
      // before that one is wiped by alpha = 0 all the same.
      const bool all_masked =
          kv_start > last_pos ||
          (p_.sliding_window && kv_start + valid - 1 <= first_pos - *p_.sliding_window);
      if (exact_skips_ && all_masked) continue;
      const std::byte* buf = copy_kv_block({heads_blk, s, kv_blk}, kv_blk % 2);
      for (int64_t h = 0; h < hkv_blk_; ++h) {
        flash(heads_blk, h, s, a, b, r0, kv_blk, !started, buf);
      }
      started = true;
    }
  }

  // The TPU's MultiPageAsyncCopyDescriptor: bkv pages of block id's combined heads into one
  // half of the double buffer; page slots past the sequence's last page copy its first page
  // (dma_page_column). A page index in [-P, 0) is read from the end, as TPU interpret
  // mode's numpy indexing does (jax mode accepts it; strict mode does not).
  const std::byte* copy_kv_block(const KvBlockId& id, int64_t half) {
    const int64_t S = view_.page_size();
    const int64_t P = in_.kv_pages.dim(0);
    const int64_t slot_bytes = hc_blk_ * d_ * kv_bytes_;
    const int64_t page_bytes = S * view_.num_kv_heads() * 2 * d_ * kv_bytes_;
    std::byte* dst = kv_buf_.data() + half * kv_per_blk_ * slot_bytes;
    // With exact skips the slots past the last valid token are never read: copy only the
    // pages that hold valid tokens.
    const int64_t valid = std::min(kv_per_blk_, view_.kv_len(id.seq) - id.kv_blk * kv_per_blk_);
    const int64_t pages = exact_skips_ ? (valid + S - 1) / S : bkv_;
    for (int64_t i = 0; i < pages; ++i) {
      const int64_t column = dma_page_column(in_, bkv_, id, i);
      int64_t page = in_.page_indices.int_at(id.seq * view_.pages_per_seq() + column);
      if (page < 0) page += P;
      if (page < 0 || page >= P) throw std::out_of_range("tiled_attention: page index out of range (validate first)");
      const std::byte* src = in_.kv_pages.data() + page * page_bytes +
                             id.heads_blk * hc_blk_ * d_ * kv_bytes_;
      for (int64_t slot = 0; slot < S; ++slot) {
        std::memcpy(dst + (i * S + slot) * slot_bytes, src + slot * page_bytes / S,
                    static_cast<size_t>(slot_bytes));
      }
    }
    return dst;
  }

  // Extracts K or V of local kv head h from the buffer as float32, zero at or past kv_len
  // (the TPU masks the NaN that unused slots may hold), scaled as the definition says.
  void extract(const std::byte* buf, int64_t h, bool value, int64_t valid, int64_t n,
               const std::optional<double>& scale, float* dst) const {
    const int64_t slot_elems = hc_blk_ * d_;
    const int64_t head = 2 * h + (value ? 1 : 0);
    for (int64_t j = 0; j < n; ++j) {
      float* row = dst + j * d_;
      if (j >= valid) {
        std::fill(row, row + d_, 0.0f);
        continue;
      }
      to_float(kv_dtype_, buf + (j * slot_elems + head * d_) * kv_bytes_, d_, row);
      if (scale || (!value && q_dtype_ == DType::kBFloat16 && dtype_is_integer(kv_dtype_))) {
        for (int64_t c = 0; c < d_; ++c) row[c] = kv_eff(q_dtype_, kv_dtype_, scale, !value, row[c]);
      }
    }
  }

  // One kv head's share of a KV block for one sequence's rows [a, b): logits, mask, soft
  // cap and JAX's online-softmax update of m, l and the accumulator. first: no earlier
  // block of this sequence contributed (JAX's kv_blk_idx == 0 initialisation).
  void flash(int64_t heads_blk, int64_t h, int64_t s, int64_t a, int64_t b, int64_t r0,
             int64_t kv_blk, bool first, const std::byte* buf) {
    const int64_t kv_len = view_.kv_len(s);
    const int64_t kv_start = kv_blk * kv_per_blk_;
    const int64_t valid = std::min(kv_per_blk_, kv_len - kv_start);
    const int64_t rows = (b - a) * group_;
    // With exact skips only the valid slots take part: a padded slot's logit is exactly
    // mask_value and its weight exactly 0 (see sequence()). Otherwise, as on the TPU, every
    // slot of the block does, zero-filled past kv_len.
    // Keys after the last row's position are masked for every row: with exact skips they are
    // left out too (prefill's causal triangle).
    const int64_t nk =
        exact_skips_ ? std::min(valid, last_pos_ + 1 - kv_start) : kv_per_blk_;
    const int64_t slot_elems = hc_blk_ * d_;
    const float* kp = k_.data();
    const float* vp = v_.data();
    Eigen::Index stride = d_;
    if (direct_f32_ && exact_skips_) {  // float32 KV, unscaled: read the buffer in place
      kp = reinterpret_cast<const float*>(buf) + 2 * h * d_;
      vp = kp + d_;
      stride = slot_elems;
    } else {
      extract(buf, h, false, valid, nk, p_.k_scale, k_.data());
      extract(buf, h, true, valid, nk, p_.v_scale, v_.data());
    }
    const int64_t q_head0 = heads_blk * hq_blk_ + h * group_;
    for (int64_t r = a; r < b; ++r) {
      for (int64_t g = 0; g < group_; ++g) {
        to_float(q_dtype_,
                 in_.q.data() + view_.q_offset(r, q_head0 + g) * dtype_size(q_dtype_), d_,
                 q_.data() + ((r - a) * group_ + g) * d_);
      }
    }
    using StridedMap = Eigen::Map<const RowMajor, 0, Eigen::OuterStride<>>;
    const StridedMap k(kp, nk, d_, Eigen::OuterStride<>(stride));
    const StridedMap v(vp, nk, d_, Eigen::OuterStride<>(stride));
    Map q(q_.data(), rows, d_), logits(logits_.data(), rows, nk), qkv(qkv_.data(), rows, d_);
    // Decode's few rows make Eigen's GEMM mostly packing; dot products and row updates read
    // each K and V row once instead.
    const bool few_rows = rows <= kFewRows;
    if (few_rows) {
      for (int64_t j = 0; j < nk; ++j) {
        for (int64_t i = 0; i < rows; ++i) logits(i, j) = q.row(i).dot(k.row(j));
      }
    } else {
      logits.noalias() = q * k.transpose();
    }

    const int64_t q_pos0 = view_.q_position(s, a - view_.q_start(s));
    float* m = m_.data() + h * rows_max_ + (a - r0) * group_;
    float* l = l_.data() + h * rows_max_ + (a - r0) * group_;
    for (int64_t i = 0; i < rows; ++i) {
      Eigen::Map<Eigen::ArrayXf> x(logits_.data() + i * nk, nk);
      x *= sm_scale_;
      if (p_.soft_cap) {
        const auto cap = static_cast<float>(*p_.soft_cap);
        x = cap * (x / cap).tanh();
      }
      // Keys t with q_pos - W < t <= q_pos are visible; the mask value is added elsewhere.
      const int64_t q_pos = q_pos0 + i / group_;
      const int64_t lo = p_.sliding_window ? q_pos - *p_.sliding_window + 1 - kv_start : 0;
      const int64_t hi = q_pos + 1 - kv_start;
      for (int64_t j = 0; j < std::min(std::max<int64_t>(lo, 0), nk); ++j) x[j] += mask_value_;
      for (int64_t j = std::max<int64_t>(hi, 0); j < nk; ++j) x[j] += mask_value_;
      const float m_curr = x.maxCoeff<Eigen::PropagateNaN>();
      x = (x - m_curr).exp();
      const float l_curr = x.sum();
      const float m_prev = first ? -std::numeric_limits<float>::infinity() : m[i];
      const float l_prev = first ? 0.0f : l[i];
      const float m_next = std::isnan(m_prev)   ? m_prev
                           : std::isnan(m_curr) ? m_curr
                                                : std::max(m_prev, m_curr);
      const float alpha = std::exp(m_prev - m_next);
      const float beta = std::exp(m_curr - m_next);
      const float l_alpha = alpha * l_prev;
      const float l_next = l_alpha + beta * l_curr;
      m[i] = m_next;
      l[i] = l_next == 0.0f ? 1.0f : l_next;
      scales_[static_cast<size_t>(i)] = {l_alpha, beta, l[i]};
    }
    if (few_rows) {
      qkv.setZero();
      for (int64_t j = 0; j < nk; ++j) {
        for (int64_t i = 0; i < rows; ++i) qkv.row(i) += logits(i, j) * v.row(j);
      }
    } else {
      qkv.noalias() = logits * v;
    }
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t r = a + i / group_;
      const int64_t g = i % group_;
      float* o = acc_.data() + ((r - r0) * hq_blk_ + h * group_ + g) * d_;
      const float* add = qkv_.data() + i * d_;
      const Scales& sc = scales_[static_cast<size_t>(i)];
      for (int64_t c = 0; c < d_; ++c) {
        const float o_curr = first ? 0.0f : o[c];
        o[c] = (sc.l_alpha * o_curr + sc.beta * add[c]) / sc.l_next_safe;
      }
    }
  }

  void store(int64_t heads_blk, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t hq = 0; hq < hq_blk_; ++hq) {
        const int64_t dst = view_.q_offset(r, heads_blk * hq_blk_ + hq);
        const float* src = acc_.data() + ((r - r0) * hq_blk_ + hq) * d_;
        if (q_dtype_ == DType::kFloat32) {
          std::memcpy(out_.data() + dst * 4, src, static_cast<size_t>(d_) * sizeof(float));
          continue;
        }
        for (int64_t c = 0; c < d_; ++c) store_float(q_dtype_, out_.data(), dst + c, src[c]);
      }
    }
  }

  const Inputs& in_;
  const Params& p_;
  const PagedKvView view_;
  Tensor& out_;
  const DType q_dtype_, kv_dtype_;
  const int64_t kv_bytes_, d_, group_, hc_blk_, hq_blk_, hkv_blk_, bkv_, bq_, kv_per_blk_,
      rows_max_;
  Scratch<std::byte> kv_buf_;  // [2, bkv, S, Hc_blk, D] in the KV dtype
  Scratch<float> k_, v_;        // [bkv * S, D]
  Scratch<float> q_;            // [bq * group, D]
  Scratch<float> logits_;       // [bq * group, bkv * S], then the weights s_curr
  Scratch<float> qkv_;          // [bq * group, D]
  Scratch<float> m_, l_;        // [Hkv_blk, bq * group]
  Scratch<float> acc_;          // [bq, Hq_blk, D]
  Scratch<Scales> scales_;      // [bq * group]: this KV block's update of each row
  const float mask_value_, sm_scale_;
  // Padded slots and fully masked blocks weigh exactly 0 (mask_value <= -1e30, what strict
  // validation requires), so they may be left out; -inf or a small mask keeps the TPU's
  // full computation, NaN included.
  const bool exact_skips_;
  const bool direct_f32_;  // K and V are read from the buffer in place
  int64_t last_pos_ = 0;   // position of the current sequence's last row in the block
};

// Flushes float32 subnormals to zero on this thread while alive, as TPUs do: with them on,
// a few subnormal softmax weights (exp(s - m) for s - m < -87) put x86 multiplies into
// microcode assists and slow the whole kernel by an order of magnitude.
class FlushSubnormals {
 public:
#if defined(__SSE__)
  FlushSubnormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | 0x8040); }  // FTZ | DAZ
  ~FlushSubnormals() { _mm_setcsr(saved_); }

 private:
  unsigned saved_;
#endif
};

}  // namespace

KernelPlan plan_kernel(const Inputs& in, const Params& p, const TargetProfile& target,
                       bool untuned_blocks) {
  const PagedKvView view(in);
  KernelPlan plan{};
  const auto heads = min_heads_per_block(view.num_q_heads(), 2 * view.num_kv_heads(),
                                         in.q.dtype(), in.kv_pages.dtype());
  if (!heads) throw std::invalid_argument("plan_kernel: heads not tileable (validate first)");
  plan.heads = *heads;
  const VmemShape shape{.page_size = view.page_size(),
                        .head_dim = view.head_dim(),
                        .q_heads_per_kv = view.q_heads_per_kv(),
                        .heads = plan.heads,
                        .q_dtype = in.q.dtype(),
                        .kv_dtype = in.kv_pages.dtype()};
  const int64_t limit = p.vmem_limit_bytes.value_or(default_scoped_vmem_limit(target));
  if (p.num_kv_pages_per_block && p.num_queries_per_block) {
    plan.blocks = {*p.num_kv_pages_per_block, *p.num_queries_per_block};
  } else if (untuned_blocks) {
    plan.blocks = untuned_block_sizes(view.pages_per_seq(), in.q.dim(0));
  } else {
    const auto blocks = default_block_sizes(shape, view.pages_per_seq(), in.q.dim(0), limit);
    if (!blocks) throw std::invalid_argument("plan_kernel: no block sizes fit (validate first)");
    plan.blocks = *blocks;
  }
  plan.num_heads_blks = view.num_q_heads() / plan.heads.q_heads;
  plan.num_q_blks = (in.q.dim(0) + plan.blocks.queries_per_block - 1) / plan.blocks.queries_per_block;
  plan.vmem_bytes = vmem_need_bytes(shape, plan.blocks);
  return plan;
}

namespace {

// Runs one CellWorker through the Pallas program's walk.
class LiteralProgram : public PallasProgramVisitor {
 public:
  explicit LiteralProgram(CellWorker& worker) : worker_(worker) {}
  void dma(int buf, const KvBlockId& id) override { worker_.dma(buf, id); }
  void step(int64_t hb, int64_t qb, int64_t seq, int64_t kv_blk, int buf, int64_t store_lo,
            int64_t store_hi, int pending) override {
    // The program never waits on a buffer no DMA was started into (pallas_program.h).
    if (pending == 0) throw std::logic_error("tiled_attention: a wait with no DMA pending");
    worker_.literal_step(hb, qb, seq, kv_blk, buf, store_lo, store_hi);
  }
  void cell_end(int64_t hb, int64_t qb) override { worker_.literal_cell_end(hb, qb); }

 private:
  CellWorker& worker_;
};

}  // namespace

Tensor tiled_attention(const Inputs& in, const Params& p, const KernelOptions& options) {
  const KernelPlan plan =
      plan_kernel(in, p, options.target, options.literal_schedule && options.untuned_blocks);
  Tensor out(in.q.dtype(), in.q.shape());
  if (options.literal_schedule) {  // one thread: the grid cells run in order, as on the TPU
    const FlushSubnormals flush;
    CellWorker worker(in, p, plan, /*literal=*/true, out);
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
  const int64_t cells = plan.num_heads_blks * plan.num_q_blks;
  const int hw = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const auto workers = static_cast<int>(
      std::min<int64_t>(std::max<int64_t>(cells, 1), options.threads > 0 ? options.threads : hw));
  std::atomic<int64_t> next{0};
  auto work = [&] {
    const FlushSubnormals flush;
    CellWorker worker(in, p, plan, options.literal_schedule, out);
    for (int64_t c = next++; c < cells; c = next++) {
      worker.run(c / plan.num_q_blks, c % plan.num_q_blks);
    }
  };
  if (workers <= 1) {
    work();
    return out;
  }
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(workers - 1));
  for (int w = 1; w < workers; ++w) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  return out;
}

}  // namespace rpa
