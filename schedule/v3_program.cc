#include "schedule/v3_program.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include "core/v3_attention_math.h"
#include "core/dtype.h"
#include "core/float32_scalar.h"
#include "core/flush_subnormals.h"
#include "core/python_repr.h"
#include "core/v3_cache_layout.h"
#include "schedule/xla_row_sum.h"

namespace rpa {
namespace {

using Kind = V3ProgramError::Kind;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::string I(int64_t v) { return py_int_repr(v); }

// Python's // and pl.cdiv on int32 scalars (floor division; b > 0 where the program divides).
int64_t floordiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
int64_t cdiv(int64_t a, int64_t b) { return floordiv(a + b - 1, b); }

// x rounded to the accumulation dtype (float32: as is).
float rnd(DType a, float x) { return a == DType::kFloat32 ? x : round_to(a, x); }

// A DMA semaphore in interpret mode's "on_wait" execution: queued copies, run newest first
// by a wait until the count suffices.
struct Semaphore {
  struct Copy {
    int64_t units;
    std::function<void()> run;
  };
  int64_t count = 0;
  std::vector<Copy> queue;

  void start(int64_t units, std::function<void()> run) {
    queue.push_back({std::max<int64_t>(units, 0), std::move(run)});
  }
  void wait(int64_t units, const std::string& what) {
    while (count < units) {
      if (queue.empty()) {
        throw V3ProgramError(Kind::kHang, "the kernel waits for " + what +
                                              ", which no started copy provides (it hangs)");
      }
      Semaphore::Copy c = std::move(queue.back());
      queue.pop_back();
      c.run();
      count += c.units;
    }
    count -= units;
  }
};

// sum_i prod(i), i < n (prod: the exact product, a double), as a second run orders it:
// forward, reversed and pairwise add float32 products, the blocked orders exact ones.
template <class Prod>
float ordered_dot(V3DotOrder order, int64_t n, const Prod& prod) {
  const auto term = [&](int64_t i) { return static_cast<float>(prod(i)); };
  switch (order) {
    case V3DotOrder::kForward: {
      float s = 0.0f;
      for (int64_t i = 0; i < n; ++i) s += term(i);
      return s;
    }
    case V3DotOrder::kReversed: {
      float s = 0.0f;
      for (int64_t i = n - 1; i >= 0; --i) s += term(i);
      return s;
    }
    case V3DotOrder::kPairwise: {
      const std::function<float(int64_t, int64_t)> half = [&](int64_t lo, int64_t hi) -> float {
        if (hi - lo == 1) return term(lo);
        if (hi - lo == 0) return 0.0f;
        const int64_t mid = lo + (hi - lo) / 2;
        return half(lo, mid) + half(mid, hi);
      };
      return half(0, n);
    }
    case V3DotOrder::kBlocked128:
    case V3DotOrder::kBlocked256: {
      const int64_t chunk = order == V3DotOrder::kBlocked128 ? 128 : 256;
      float total = 0.0f;
      for (int64_t c0 = 0; c0 < n; c0 += chunk) {
        float s = 0.0f;
        for (int64_t i = c0; i < std::min(n, c0 + chunk); ++i) {
          s = static_cast<float>(static_cast<double>(s) + prod(i));
        }
        total += s;
      }
      return total;
    }
  }
  return 0.0f;
}

// A float32 result moved by up to `units` times 2^-24 of itself, as far as a float32 value
// goes without passing that (a second run's exp or tanh: kExpError is 8 such units, 8 float32
// ulps at the top of a binade, 4 at its bottom).
float nudge(float x, int units) {
  if (units == 0 || !std::isfinite(x) || x == 0.0f) return x;
  const double target = static_cast<double>(x) * (1.0 + units * 0x1p-24);
  auto y = static_cast<float>(target);
  while (std::fabs(static_cast<double>(y) - x) > std::fabs(target - x)) y = std::nextafter(y, x);
  return y;
}

class Program {
 public:
  Program(Dialect d, const V3Inputs& in, const V3Params& p, const V3ProgramOptions& o)
      : d_(d),
        hd64_(d == Dialect::kTpuInferenceV3Hd64),
        in_(in),
        p_(p),
        o_(o),
        qdt_(in.queries.dtype()),
        kvdt_(in.kv_cache.dtype()),
        acc_dtype_(hd64_ ? DType::kFloat32 : p.out_dtype.value_or(v3_default_out_dtype(qdt_))),
        T_(in.queries.dim(0)),
        Hq_(in.queries.dim(1)),
        D_(in.queries.dim(2)),
        Hkv_(in.keys.dim(1)),
        layout_(d, kvdt_, Hkv_, D_),
        Dp_(layout_.padded_head_dim()),
        qpack_(32 / dtype_bits(qdt_)),
        qph_(Hq_ / Hkv_),
        qph_p_(v3_align(qph_, qpack_)),
        pages_(in.kv_cache.dim(0)),
        S_(in.kv_cache.dim(1)),
        N_(in.kv_lens.dim(0)),
        npi_(in.page_indices.dim(0)),
        pps_(npi_ / N_),
        qe_(dtype_size(qdt_)),
        rec_(layout_.token_stride()),
        rec_bytes_(rec_ * dtype_size(kvdt_)),
        cache_(in.kv_cache) {
    // prepare_inputs: q as [Hkv, T, qph_p, Dp], zero padded; merge_kv's records.
    qo_.assign(static_cast<size_t>(Hkv_ * T_ * qph_p_ * Dp_ * qe_), std::byte{0});
    // head_dim 0 (native mode lets it through, finding 27): nothing to copy, and no element
    // of an empty buffer to take the address of (UBSan).
    for (int64_t t = 0; !qo_.empty() && t < T_; ++t) {
      for (int64_t hq = 0; hq < Hq_; ++hq) {
        std::memcpy(&qo_[static_cast<size_t>(qo_index(hq / qph_, t, hq % qph_, 0) * qe_)],
                    in.queries.data() + (t * Hq_ + hq) * D_ * qe_, static_cast<size_t>(D_ * qe_));
      }
    }
    if (o_.enclosure) {
      qo_lo_.resize(qo_.size() / static_cast<size_t>(qe_));
      for (size_t e = 0; e < qo_lo_.size(); ++e) qo_lo_[e] = load_float(qdt_, qo_.data(), static_cast<int64_t>(e));
      qo_hi_ = qo_lo_;
    }
    const int64_t kve = dtype_size(kvdt_);
    new_kv_.assign(static_cast<size_t>(T_ * rec_bytes_), std::byte{0});
    for (int64_t t = 0; !new_kv_.empty() && t < T_; ++t) {
      for (int64_t h = 0; h < Hkv_; ++h) {
        const int64_t src = (t * Hkv_ + h) * D_ * kve;
        std::byte* dst = &new_kv_[static_cast<size_t>(t * rec_bytes_)];
        std::memcpy(dst + layout_.k_offset(h) * kve, in.keys.data() + src, static_cast<size_t>(D_ * kve));
        std::memcpy(dst + layout_.v_offset(h) * kve, in.values.data() + src, static_cast<size_t>(D_ * kve));
      }
    }
  }

  V3KernelResult run() {
    const FlushSubnormals flush;
    if (o_.features) call_features();
    if (hd64_) {
      run_hd64();
    } else {
      run_pass(V3Pass::kDecode, 1);
      if (p_.chunk_prefill_size) run_pass(V3Pass::kPrefill, *p_.chunk_prefill_size);
      run_pass(V3Pass::kMixed, std::nullopt);
    }
    // prepare_outputs: the first qph heads of each kv head, lanes [0, D) (hd64: [64, 128)).
    V3KernelResult r{Tensor(qdt_, in_.queries.shape()), std::move(cache_)};
    const int64_t lane0 = hd64_ ? 64 : 0;
    for (int64_t t = 0; t < T_; ++t) {
      for (int64_t hq = 0; hq < Hq_; ++hq) {
        std::memcpy(r.out.data() + (t * Hq_ + hq) * D_ * qe_,
                    &qo_[static_cast<size_t>(qo_index(hq / qph_, t, hq % qph_, lane0) * qe_)],
                    static_cast<size_t>(D_ * qe_));
      }
    }
    if (V3Enclosure* e = o_.enclosure) {
      e->lo.assign(static_cast<size_t>(T_ * Hq_ * D_), 0.0);
      e->hi = e->lo;
      e->max_abs_v = max_abs_v_;
      for (int64_t t = 0; t < T_; ++t) {
        for (int64_t hq = 0; hq < Hq_; ++hq) {
          for (int64_t c = 0; c < D_; ++c) {
            const auto from = static_cast<size_t>(qo_index(hq / qph_, t, hq % qph_, lane0 + c));
            const auto to = static_cast<size_t>((t * Hq_ + hq) * D_ + c);
            e->lo[to] = qo_lo_[from];
            e->hi[to] = qo_hi_[from];
          }
        }
      }
    }
    return r;
  }

 private:
  int64_t qo_index(int64_t h, int64_t t, int64_t j, int64_t lane) const {
    return ((h * T_ + t) * qph_p_ + j) * Dp_ + lane;
  }
  int64_t buf_index(int64_t h, int64_t r, int64_t j, int64_t lane) const {
    return ((h * bq_sz_ + r) * qph_p_ + j) * Dp_ + lane;
  }
  int64_t cu(int64_t i) const { return in_.cu_q_lens.int_at(i); }
  int64_t kv_len(int64_t s) const { return in_.kv_lens.int_at(s); }
  int64_t page_index(int64_t i) const {
    if (i < 0 || i >= npi_) {
      throw V3ProgramError(Kind::kRun, "the kernel reads page_indices[" + I(i) + "], outside its " +
                                           I(npi_) + " entries");
    }
    return in_.page_indices.int_at(i);
  }
  const std::byte* cache_record(int64_t page, int64_t slot) const {
    return cache_.data() + layout_.token_offset(page, slot, S_) * dtype_size(kvdt_);
  }
  // The same, to write: the cache's own storage (a borrowed input, e.g. a caller's numpy
  // array, is copied first: Tensor::data()), never the caller's.
  std::byte* cache_record_to_write(int64_t page, int64_t slot) {
    return cache_.data() + layout_.token_offset(page, slot, S_) * dtype_size(kvdt_);
  }
  void check_page(int64_t page, const char* what) const {
    if (page < 0 || page >= pages_) {
      throw V3ProgramError(Kind::kRun, std::string(what) + " page " + I(page) +
                                           ", outside the cache's " + I(pages_) +
                                           " pages (interpret mode raises IndexError)");
    }
  }
  void check_rows(int64_t start, int64_t sz, int64_t limit, const std::string& what) const {
    if (sz > 0 && (start < 0 || start + sz > limit)) {
      throw V3ProgramError(Kind::kRun, what + " rows [" + I(start) + ", " + I(start + sz) +
                                           ") of " + I(limit) + " (interpret mode raises)");
    }
    if (sz < 0 && start + sz < 0) {
      throw V3ProgramError(Kind::kRun, what + ": a copy of negative size " + I(sz) +
                                           " before row 0 (numpy slices it from the end)");
    }
  }

  // -- path features (schedule/path_features.h) --------------------------------------------
  // One feature of the part running now ("decode", "prefill", "mixed", "hd64").
  void hit(std::string_view name) const {
    if (o_.features) o_.features->hit(part_ + "." + std::string(name));
  }
  // What the call costs in TPU interpret mode (path_features.h, "cost."): not a feature.
  void cost(std::string_view name, int64_t n) const {
    if (o_.features && n > 0) o_.features->hit(name, n);
  }
  // The call's own: dtypes, scales, the options its arithmetic depends on.
  void call_features() const {
    PathFeatures& f = *o_.features;
    f.hit("dtype.q." + std::string(dtype_name(qdt_)));
    f.hit("dtype.kv." + std::string(dtype_name(kvdt_)));
    if (!hd64_) f.hit("dtype.acc." + std::string(dtype_name(acc_dtype_)));
    if (p_.q_scale) f.hit("scale.q");
    if (p_.k_scale) f.hit("scale.k");
    if (p_.v_scale) f.hit("scale.v");
    if (p_.soft_cap) f.hit("soft_cap");
    if (p_.sliding_window) f.hit("window");
    if (in_.attention_sink) f.hit("sink");
    if (p_.chunk_prefill_size) f.hit("chunk_prefill");
    if (!hd64_ && !p_.use_causal_mask) f.hit("causal.off");
    if (!hd64_ && p_.skip_kv_mask) f.hit("skip_kv_mask");
    if (!hd64_ && !p_.update_kv_cache) f.hit("cache_update.off");
    if (p_.mask_value) f.hit("mask_value.set");
    // The mask value as the row max keeps it (kernel.py: rounded to the accumulation dtype).
    const float mask = static_cast<float>(attention_math(d_, p_, qdt_).mask_value);
    const float kept = hd64_ ? mask : rnd(acc_dtype_, mask);
    if (std::isinf(kept)) {
      f.hit("mask_value.rounds_to_inf");
    } else if (kept != mask) {
      f.hit("mask_value.rounds_away");
    }
    if (cu(in_.distribution.int_at(2)) < T_) f.hit("rows.padding_past_last_sequence");
    if (in_.distribution.int_at(2) < N_) f.hit("seqs.slots_unused");
  }
  // A sequence of the part: its cached tokens, last page, query blocks.
  void seq_features(int64_t seq, int64_t q_len, int64_t actual_bq,
                    std::optional<int64_t> static_q_len) {
    kv_len_now_ = kv_len(seq);
    if (!o_.features) return;
    hit("seq");
    if (kv_len_now_ == q_len) hit("seq.no_cached_tokens");
    if (kv_len_now_ % S_ != 0) hit("seq.partial_last_page");
    hit(cdiv(static_q_len.value_or(q_len), actual_bq) > 1 ? "q_blocks.several" : "q_blocks.one");
    if (q_len > actual_bq && q_len % actual_bq != 0) hit("q_block.partial_last");
    if (static_q_len && *static_q_len > q_len) hit("q_block.static_rows_past_q_len");
  }
  // Where the first row's and the last row's windows of a query block start among the KV
  // blocks (rows at positions q0 and q1; keys [0, effective) seen).
  void window_features(int64_t q0, int64_t q1, int64_t effective) const {
    if (!o_.features || !p_.sliding_window) return;
    const int64_t w = *p_.sliding_window;
    const int64_t k0 = q0 - w + 1, k1 = q1 - w + 1;
    hit(std::string("window.") + window_start_kind(k0, bkv_sz_, effective));
    hit(std::string("window.last_row_") + window_start_kind(k1, bkv_sz_, effective));
    if (k0 > 0 && floordiv(k0, bkv_sz_) != floordiv(std::max<int64_t>(k1, 0), bkv_sz_)) {
      hit("window.rows_start_in_different_blocks");
    }
    // The start block is taken from q - W, the last masked key: one block early when the
    // first kept key opens a block.
    if (k0 > 0 && k0 % bkv_sz_ == 0) hit("window.last_masked_key_ends_a_block");
  }
  // How close one KV block's positions come to their integer type's wrap.
  void position_features(int64_t q_max, int64_t k_max) const {
    if (!o_.features) return;
    const int64_t limit = int16_positions_ ? 32767 : 2147483647;
    const int64_t v = std::max(q_max, k_max + (p_.sliding_window && !hd64_ ? *p_.sliding_window : 0));
    hit(std::string(int16_positions_ ? "positions.int16." : "positions.int32.") +
        wrap_margin_bucket(limit - v));
    // Positions themselves past int16's range (the long tier's calls alone).
    if (std::max(q_max, k_max) > 32767) hit("positions.past_int16");
  }
  // The blocks a query block walks, what each fetch brings, and the compute blocks.
  void kv_block_features(int64_t bkv_idx, int64_t first, int64_t end, int64_t effective) const {
    if (!o_.features) return;
    hit(std::string("kv_block.") + block_run_kind(bkv_idx, first, end));
    if (bkv_idx + 1 == end && effective % bkv_sz_ != 0) hit("kv_block.partial_last");
    if (bkv_idx + 1 == end && kv_len_now_ % S_ != 0) hit("kv_block.partial_last_page");
  }
  // A prefetch of KV block nbkv of query block nbq of sequence nseq, from block bq_idx of seq.
  void prefetch_features(int64_t seq, int64_t bq_idx, int64_t nseq, int64_t nbq, int64_t nbkv) const {
    if (!o_.features) return;
    hit(nseq != seq ? "prefetch.next_seq" : nbq != bq_idx ? "prefetch.next_q_block" : "prefetch.next_kv_block");
    if (nbkv > 0 && (nseq != seq || nbq != bq_idx)) hit("prefetch.window_start");
  }
  void fetch_features(int64_t sz_cache, int64_t sz_new) const {
    if (!o_.features) return;
    hit(sz_cache > 0 ? (sz_new > 0 ? "fetch.cache_and_new" : "fetch.cache_only")
                     : (sz_new > 0 ? "fetch.new_only" : "fetch.nothing"));
    if (sz_cache > 0 && sz_new > 0 && sz_cache % S_ != 0) hit("fetch.new_starts_mid_page");
  }

  // -- the scratch of one pallas_call ---------------------------------------------------
  void allocate(int64_t bq_sz, int64_t bkv_sz) {
    bq_sz_ = bq_sz;
    bkv_sz_ = bkv_sz;
    for (int b = 0; b < 2; ++b) {
      bkv_[b].assign(static_cast<size_t>(bkv_sz * rec_bytes_), std::byte{0});
      for (int64_t e = 0; e < bkv_sz * rec_; ++e) store_float(kvdt_, bkv_[b].data(), e, kNaN);
      for (auto* buf : {&bq_[b], &bo_[b]}) {
        buf->assign(static_cast<size_t>(Hkv_ * bq_sz * qph_p_ * Dp_ * qe_), std::byte{0});
        for (int64_t e = 0; e < Hkv_ * bq_sz * qph_p_ * Dp_; ++e) store_float(qdt_, buf->data(), e, kNaN);
      }
    }
    const auto rows = static_cast<size_t>(Hkv_ * bq_sz * qph_p_);
    if (o_.enclosure) {
      const auto elems = static_cast<size_t>(Hkv_ * bq_sz * qph_p_ * Dp_);
      for (int b = 0; b < 2; ++b) {
        for (auto* buf : {&bq_lo_[b], &bq_hi_[b], &bo_lo_[b], &bo_hi_[b]}) buf->assign(elems, kNaN);
      }
      enc_rows_.assign(rows, V3RowEnclosure{});
    }
    l_.assign(rows, kNaN);
    m_.assign(rows, kNaN);
    acc_.assign(rows * static_cast<size_t>(Dp_), kNaN);
    for (auto& row : sems_) {
      for (Semaphore& s : row) s = Semaphore{};
    }
    sem_ids_ = {0, 0, 0};
    bo_ids_ = {-1, -1, -1, -1};
    bkv_update_ids_ = {-1, -1, -1, -1, -1, -1};
  }

  // -- DMAs ---------------------------------------------------------------------------------
  // _fetch_bq (q rows of the aliased q/out array into q buffer b) and _send_bo (output
  // buffer b into those rows): block `idx` of sequence `seq`, bq_sz rows or what is left.
  void q_rows(bool send, int64_t seq, int64_t idx, int b, bool wait) {
    const int64_t start = cu(seq) + idx * bq_sz_;
    const int64_t sz = std::min(bq_sz_, cu(seq + 1) - start);
    Semaphore& sem = sems_[send ? 2 : 1][b];
    if (wait) {
      return sem.wait(sz, std::string(send ? "the output of " : "") + "q block " + I(idx) +
                              " of sequence " + I(seq));
    }
    sem.start(sz, [this, send, start, sz, b] {
      check_rows(start, sz, T_, send ? "an output send writes output" : "a q fetch reads queries");
      check_rows(0, sz, bq_sz_, send ? "an output send reads the output buffer's"
                                     : "a q fetch writes the q buffer's");
      if (sz <= 0) return;
      const auto row = static_cast<size_t>(sz * qph_p_ * Dp_ * qe_);
      for (int64_t h = 0; h < Hkv_; ++h) {
        std::byte* hbm = &qo_[static_cast<size_t>(qo_index(h, start, 0, 0) * qe_)];
        std::byte* vmem = &(send ? bo_ : bq_)[b][static_cast<size_t>(buf_index(h, 0, 0, 0) * qe_)];
        std::memcpy(send ? hbm : vmem, send ? vmem : hbm, row);
        if (!o_.enclosure) continue;
        const auto elems = static_cast<size_t>(sz * qph_p_ * Dp_);
        const auto at_hbm = static_cast<size_t>(qo_index(h, start, 0, 0));
        const auto at_vmem = static_cast<size_t>(buf_index(h, 0, 0, 0));
        for (int side = 0; side < 2; ++side) {
          std::vector<float>& mem = side == 0 ? qo_lo_ : qo_hi_;
          std::vector<float>& buf = send ? (side == 0 ? bo_lo_ : bo_hi_)[b] : (side == 0 ? bq_lo_ : bq_hi_)[b];
          if (send) {
            std::copy_n(buf.begin() + static_cast<std::ptrdiff_t>(at_vmem), elems,
                        mem.begin() + static_cast<std::ptrdiff_t>(at_hbm));
          } else {
            std::copy_n(mem.begin() + static_cast<std::ptrdiff_t>(at_hbm), elems,
                        buf.begin() + static_cast<std::ptrdiff_t>(at_vmem));
          }
        }
      }
    });
  }
  void fetch_bq(int64_t seq, int64_t bq_idx, int b, bool wait) { q_rows(false, seq, bq_idx, b, wait); }
  void send_bo(int64_t seq, int64_t bo_idx, int b, bool wait) { q_rows(true, seq, bo_idx, b, wait); }

  void start_send_bo(int64_t seq, int64_t bo_idx, int b) {
    bo_ids_[static_cast<size_t>(b)] = seq;
    bo_ids_[static_cast<size_t>(b) + 2] = bo_idx;
    send_bo(seq, bo_idx, b, false);
  }

  void wait_send_bo(int b, int64_t seq_idx) {
    const int64_t old_seq = bo_ids_[static_cast<size_t>(b)];
    const int64_t old_bo = bo_ids_[static_cast<size_t>(b) + 2];
    const int64_t lo = hd64_ ? 0 : range_start_;
    if (lo <= old_seq && old_seq <= seq_idx) send_bo(old_seq, old_bo, b, true);
  }

  // _fetch_bkv: returns (offset, update_sz) of the new tokens it copies.
  std::pair<int64_t, int64_t> fetch_bkv(int64_t seq, int64_t bkv_idx, int b, bool wait) {
    const int64_t len = kv_len(seq);
    const int64_t kv_len_start = bkv_idx * bkv_sz_;
    const int64_t q_end = cu(seq + 1), q_len = q_end - cu(seq);
    const int64_t kv_left = len - kv_len_start;
    const int64_t from_cache =
        (hd64_ || p_.update_kv_cache) ? std::max<int64_t>(kv_left - q_len, 0) : kv_left;
    const int64_t from_new = kv_left - from_cache;
    const int64_t sz_cache = std::min(from_cache, bkv_sz_);
    const int64_t sz_new = std::min(bkv_sz_ - sz_cache, from_new);
    const int64_t page_offset = seq * pps_ + bkv_idx * bkv_p_;
    Semaphore& sem = sems_[0][b];
    if (!wait) {
      wait_update_kv_cache(b);
      cost("cost.run_page_copies", bkv_p_);
      for (int64_t i = 0; i < bkv_p_; ++i) {
        const int64_t sz = std::clamp<int64_t>(from_cache - i * S_, 0, S_);
        const int64_t page = page_index(std::min(page_offset + i, npi_ - 1));
        sem.start(sz, [this, b, i, sz, page] {
          if (sz <= 0) return;
          check_page(page, "a KV fetch reads");
          check_rows(i * S_, sz, bkv_sz_, "a KV fetch writes the KV buffer's");
          std::memcpy(&bkv_[b][static_cast<size_t>(i * S_ * rec_bytes_)], cache_record(page, 0),
                      static_cast<size_t>(sz * rec_bytes_));
        });
      }
      // The seventh patch: a copy of nothing starts at row 0.
      const int64_t new_start = sz_new > 0 ? q_end - from_new : 0;
      sem.start(sz_new, [this, b, new_start, sz_cache, sz_new] {
        check_rows(new_start, sz_new, T_, "a KV fetch reads new keys and values");
        check_rows(sz_cache, sz_new, bkv_sz_, "a KV fetch writes the KV buffer's");
        if (sz_new <= 0) return;
        std::memcpy(&bkv_[b][static_cast<size_t>(sz_cache * rec_bytes_)],
                    &new_kv_[static_cast<size_t>(new_start * rec_bytes_)],
                    static_cast<size_t>(sz_new * rec_bytes_));
      });
    } else {
      fetch_features(sz_cache, sz_new);
      sem.wait(sz_cache + sz_new, "KV block " + I(bkv_idx) + " of sequence " + I(seq));
    }
    return {kv_len_start + sz_cache, sz_new};
  }

  void update_kv_cache(int64_t seq, int b, int64_t offset, int64_t update_sz, bool wait) {
    Semaphore& sem = sems_[3][b];
    if (wait) return sem.wait(update_sz, "the cache write of sequence " + I(seq));
    const int64_t bkv_id = floordiv(offset, bkv_sz_);
    const int64_t kv_p_start = floordiv(offset, S_);
    const int64_t kv_p_end = cdiv(offset + update_sz, S_);
    int64_t ignore = offset - kv_p_start * S_;
    const int64_t p_ignore = kv_p_start - bkv_id * bkv_p_;
    const int64_t page_offset = seq * pps_ + kv_p_start;
    if (o_.features) {
      hit(kv_p_end - kv_p_start > 1 ? "cache_write.several_pages" : "cache_write.one_page");
      if (ignore > 0) hit("cache_write.starts_mid_page");
      if (p_ignore > 0) hit("cache_write.starts_past_the_blocks_first_page");
      if (writes_this_seq_++ > 0) hit("cache_write.several_kv_blocks");
    }
    int64_t left = update_sz;
    for (int64_t i = 0; i < kv_p_end - kv_p_start; ++i) {
      const int64_t sz = std::min(S_ - ignore, left);
      const int64_t page = page_index(page_offset + i);
      const int64_t src = (p_ignore + i) * S_ + ignore, slot = ignore;
      sem.start(sz, [this, b, sz, page, src, slot] {
        if (sz <= 0) return;
        check_page(page, "a cache write writes");
        check_rows(src, sz, bkv_sz_, "a cache write reads the KV buffer's");
        std::memcpy(cache_record_to_write(page, slot),
                    &bkv_[b][static_cast<size_t>(src * rec_bytes_)],
                    static_cast<size_t>(sz * rec_bytes_));
      });
      left -= sz;
      ignore = 0;
    }
  }

  void start_update_kv_cache(int64_t seq, int b, int64_t offset, int64_t update_sz) {
    bkv_update_ids_[static_cast<size_t>(b)] = seq;
    bkv_update_ids_[static_cast<size_t>(b) + 2] = offset;
    bkv_update_ids_[static_cast<size_t>(b) + 4] = update_sz;
    update_kv_cache(seq, b, offset, update_sz, false);
  }

  void wait_update_kv_cache(int b) {
    const int64_t update_sz = bkv_update_ids_[static_cast<size_t>(b) + 4];
    if (update_sz <= 0) return;
    bkv_update_ids_[static_cast<size_t>(b) + 4] = 0;
    update_kv_cache(bkv_update_ids_[static_cast<size_t>(b)], b,
                    bkv_update_ids_[static_cast<size_t>(b) + 2], update_sz, true);
  }

  // -- reading the buffers -----------------------------------------------------------------
  // Lane `lane` of row (token r, head j) of kv head h in q buffer b; past bq_sz: all-ones bits.
  float q_at(int b, int64_t h, int64_t r, int64_t j, int64_t lane) const {
    if (r >= bq_sz_) return kNaN;
    return load_float(qdt_, bq_[b].data(), buf_index(h, r, j, lane));
  }
  // Element `e` of token t's record in KV buffer b; past bkv_sz: all-ones bits.
  float kv_at(int b, int64_t t, int64_t e) const {
    if (t >= bkv_sz_) return kNaN;
    return load_float(kvdt_, bkv_[b].data(), t * rec_ + e);
  }

  // q / q_scale in q's dtype, clipped to the KV dtype's range and cast to it (both kernels).
  float quantize_q(float q) const {
    if (!p_.q_scale) return q;
    float x = round_to(qdt_, q / round_double_to(qdt_, *p_.q_scale));
    if (dtype_is_float(kvdt_)) {
      const float lo = round_double_to(qdt_, -dtype_finite_max(kvdt_));
      const float hi = round_double_to(qdt_, dtype_finite_max(kvdt_));
      if (!std::isnan(x)) x = std::min(std::max(x, lo), hi);
    }
    return round_to(kvdt_, x);
  }

  // -- kernel.py ----------------------------------------------------------------------------
  void run_pass(V3Pass pass, std::optional<int64_t> static_q_len) {
    const V3BlockSizes blocks = v3_pass_block_sizes(in_, p_, pass, o_.tpu_version);
    const auto [bq_sz, bkv_sz, bq_csz, bkv_csz] = blocks;
    const char* names[] = {"decode", "prefill", "mixed"};
    const std::string where = std::string(names[static_cast<int>(pass)]) + " pass";
    if (bkv_sz % S_ != 0 || bkv_sz % layout_.packing() != 0) {
      throw V3ProgramError(Kind::kTrace, where + ": bkv_sz=" + I(bkv_sz) +
                                             " is not a multiple of page_size and the KV packing "
                                             "(an assertion)");
    }
    // Native validation lets a fetch block of no tokens through (strict
    // block_size_nonpositive); what kernel.py then does (its loops divide by bkv_sz) has not
    // been run in interpret mode, so the literal schedule does not claim it (it divided by 0).
    if (bkv_sz < 1 && range_of(pass)) {
      throw std::invalid_argument(where + ": the literal v3 schedule does not model a fetch block "
                                  "of bkv_sz=" + I(bkv_sz) + " tokens (block_size_nonpositive)");
    }
    const int64_t actual_bq = static_q_len ? std::min(bq_sz, *static_q_len) : bq_sz;
    const int64_t actual_bq_csz = std::min(bq_csz, actual_bq);
    if (actual_bq_csz <= 0 || bkv_csz <= 0) {
      throw V3ProgramError(Kind::kTrace, where + ": a block size of 0 (range() arg 3 must not be zero)");
    }
    causal_ = pass != V3Pass::kDecode && p_.use_causal_mask;
    if (causal_ && p_.skip_kv_mask) {
      throw V3ProgramError(Kind::kTrace, where + ": use_causal_mask with skip_kv_mask (an assertion)");
    }
    // head_dim 0 (native validation lets it through; strict head_dim_zero): the body's
    // strided_load folds a row of align(0, 128) lanes into 0 folds and asserts sz % step with
    // step 0 (ZeroDivisionError in TPU interpret mode, on every call; finding 27).
    if (Dp_ == 0) {
      throw V3ProgramError(Kind::kTrace, where + ": head_dim 0 (strided_load: integer modulo by zero)");
    }
    // A window past int16 traces: JAX 0.11 wraps the Python int into int16 (pos() below;
    // measured in TPU interpret mode, finding 25).
    int16_positions_ = qpack_ != 1 && o_.tpu_version >= 6 && pps_ * S_ <= 32767;
    allocate(bq_sz, bkv_sz);
    part_ = names[static_cast<int>(pass)];
    bkv_p_ = bkv_sz / S_;
    // Each pass is a pallas_call of its own, traced whether or not it has sequences: its fetch
    // loop unrolls bkv_p copies, its compute loop q chunks times kv heads bodies.
    cost("cost.traced_page_copies", bkv_p_);
    cost("cost.traced_compute_bodies", cdiv(actual_bq, actual_bq_csz) * Hkv_);
    bq_csz_ = actual_bq_csz;
    bkv_csz_ = bkv_csz;
    const int64_t dist[3] = {in_.distribution.int_at(0), in_.distribution.int_at(1),
                             in_.distribution.int_at(2)};
    range_start_ = pass == V3Pass::kDecode ? 0 : dist[static_cast<int>(pass) - 1];
    range_end_ = dist[static_cast<int>(pass)];
    if (range_start_ < range_end_) {
      hit("runs");
      hit(int16_positions_ ? "positions.int16" : "positions.int32");
      if (actual_bq_csz < actual_bq) hit("q_compute_blocks.several");
      if (actual_bq % actual_bq_csz != 0) hit("q_compute_block.partial");
    }
    for (int64_t seq = range_start_; seq < range_end_; ++seq) {
      const int64_t q_len = cu(seq + 1) - cu(seq);
      const int64_t gap = kv_len(seq) - q_len;
      seq_features(seq, q_len, actual_bq, static_q_len);
      int64_t cur_start = 0;
      next_seq_start_bkv_ = 0;
      if (p_.sliding_window) {
        const int64_t w = *p_.sliding_window;
        cur_start = floordiv(std::max<int64_t>(gap - w, 0), bkv_sz);
        const int64_t next = std::min(seq + 1, range_end_ - 1);
        const int64_t next_gap = kv_len(next) - (cu(next + 1) - cu(next));
        next_seq_start_bkv_ = floordiv(std::max<int64_t>(next_gap - w, 0), bkv_sz);
      }
      if (seq == range_start_) {
        fetch_bq(seq, 0, 0, false);
        fetch_bkv(seq, cur_start, 0, false);
      }
      const int64_t num_bq = static_q_len ? cdiv(*static_q_len, actual_bq) : cdiv(q_len, actual_bq);
      for (int64_t bq_idx = 0; bq_idx < num_bq; ++bq_idx) process_bq(seq, bq_idx, num_bq, actual_bq, gap);
      if (o_.features && p_.sliding_window && cur_start > 0) hit("window.first_fetch_skips_blocks");
      if (seq == range_end_ - 1) {
        for (int b = 0; b < 2; ++b) {
          wait_send_bo(b, seq);
          wait_update_kv_cache(b);
        }
      }
    }
  }

  // Whether a kernel.py pass has sequences to walk.
  bool range_of(V3Pass pass) const {
    const int i = static_cast<int>(pass);
    return (i == 0 ? 0 : in_.distribution.int_at(i - 1)) < in_.distribution.int_at(i);
  }

  int64_t pos(int64_t v) const {
    return int16_positions_ ? static_cast<int16_t>(static_cast<uint16_t>(v))
                            : static_cast<int32_t>(static_cast<uint32_t>(v));
  }

  void process_bq(int64_t seq, int64_t bq_idx, int64_t num_bq, int64_t actual_bq, int64_t gap) {
    std::fill(l_.begin(), l_.end(), 0.0f);
    std::fill(m_.begin(), m_.end(), -kInf);
    std::fill(acc_.begin(), acc_.end(), 0.0f);
    for (V3RowEnclosure& e : enc_rows_) e.start(acc_dtype_, false, Dp_, -kInf, 0.0f);
    const int bq_sem = static_cast<int>(sem_ids_[0]);
    const bool last_bq = bq_idx + 1 == num_bq;
    const int64_t next_seq = last_bq ? seq + 1 : seq;
    const int64_t next_bq = last_bq ? 0 : bq_idx + 1;
    const int next_bq_sem = bq_sem == 0 ? 1 : 0;
    const int64_t processed_q_len = gap + bq_idx * actual_bq;
    const int64_t len = kv_len(seq);
    int64_t start_bkv = 0;
    if (p_.sliding_window) {
      start_bkv = floordiv(std::max<int64_t>(processed_q_len - *p_.sliding_window, 0), bkv_sz_);
    }
    const int64_t effective = causal_ ? std::min(len, processed_q_len + actual_bq) : len;
    const int64_t end_bkv = cdiv(effective, bkv_sz_);
    if (o_.features) {
      const int64_t rows = std::min(actual_bq, cu(seq + 1) - cu(seq) - bq_idx * actual_bq);
      window_features(processed_q_len, processed_q_len + std::max<int64_t>(rows, 1) - 1, effective);
      if (start_bkv > 0) hit("window.skips_blocks");
      if (effective < len) hit("causal.skips_blocks");
      if (end_bkv <= start_bkv) hit("kv_blocks.none");
      if (last_bq && p_.update_kv_cache) writes_this_seq_ = 0;
    }
    if (next_seq < range_end_) {
      sem_ids_[0] = next_bq_sem;
      fetch_bq(next_seq, next_bq, next_bq_sem, false);
    }
    for (int64_t bkv_idx = start_bkv; bkv_idx < end_bkv; ++bkv_idx) {
      const int bkv_sem = static_cast<int>(sem_ids_[1]);
      // get_next_bkv_ids
      const bool last_bkv = bkv_idx + 1 == end_bkv;
      int64_t nbq = last_bkv ? bq_idx + 1 : bq_idx;
      const bool nlast_bq = nbq == num_bq;
      const int64_t nseq = nlast_bq ? seq + 1 : seq;
      int64_t next_bq_start_bkv = 0;
      if (p_.sliding_window) {
        next_bq_start_bkv =
            floordiv(std::max<int64_t>(gap + (bq_idx + 1) * actual_bq - *p_.sliding_window, 0), bkv_sz_);
      }
      int64_t nbkv = last_bkv ? next_bq_start_bkv : bkv_idx + 1;
      if (nlast_bq) nbkv = next_seq_start_bkv_;
      if (nseq < range_end_) {
        const int next_sem = bkv_sem == 0 ? 1 : 0;
        sem_ids_[1] = next_sem;
        fetch_bkv(nseq, nbkv, next_sem, false);
        prefetch_features(seq, bq_idx, nseq, nbq, nbkv);
      } else {
        hit("prefetch.none_past_range");
      }
      kv_block_features(bkv_idx, start_bkv, end_bkv, effective);
      if (bkv_idx == start_bkv) fetch_bq(seq, bq_idx, bq_sem, true);
      const auto [offset, update_sz] = fetch_bkv(seq, bkv_idx, bkv_sem, true);
      if (p_.update_kv_cache && update_sz > 0 && bq_idx == num_bq - 1) {
        start_update_kv_cache(seq, bkv_sem, offset, update_sz);
      }
      const int64_t eff_bkv = std::max<int64_t>(std::min(effective - bkv_idx * bkv_sz_, bkv_sz_), 0);
      const int64_t loops = cdiv(eff_bkv, bkv_csz_);
      if (o_.features) {
        // The positions the block's compute blocks compare: its rows, and its keys up to the
        // last compute block's last lane.
        if (loops > 0) {
          position_features(processed_q_len + actual_bq - 1, bkv_idx * bkv_sz_ + loops * bkv_csz_ - 1);
        }
        if (eff_bkv % bkv_csz_ != 0) hit("compute_block.partial");
        if (loops > 1) hit("compute_blocks.several");
        if (loops * bkv_csz_ < bkv_sz_) hit("compute_blocks.fewer_than_the_block");
      }
      for (int64_t idx = 0; idx < loops; ++idx) {
        count_step();
        if (!o_.compute) continue;
        for (int64_t bq_start = 0; bq_start < actual_bq; bq_start += bq_csz_) {
          for (int64_t h = 0; h < Hkv_; ++h) {
            kernel_block(bq_sem, bkv_sem, h, bq_start, idx * bkv_csz_,
                         processed_q_len + bq_start, bkv_idx * bkv_sz_ + idx * bkv_csz_, effective);
          }
        }
      }
    }
    // out = acc / l in out_dtype, stored whole into the output buffer, then sent.
    send_output(seq, bq_idx, acc_dtype_,
                [this](float acc, float l) { return rnd(acc_dtype_, acc / l); });
  }

  // The end of a query block: the next output buffer half (sem_ids[2]) once its previous send
  // is done, every row of it stored from the accumulator as out(acc, l) in `stored` (bits
  // into the q-dtype buffer), then sent.
  template <class Out>
  void send_output(int64_t seq, int64_t bq_idx, DType stored, Out out) {
    const int bo_sem = static_cast<int>(sem_ids_[2]);
    sem_ids_[2] = bo_sem == 0 ? 1 : 0;
    wait_send_bo(bo_sem, seq);
    for (int64_t h = 0; h < Hkv_; ++h) {
      for (int64_t row = 0; row < bq_sz_ * qph_p_; ++row) {
        const size_t lm = static_cast<size_t>(h * bq_sz_ * qph_p_ + row);
        for (int64_t lane = 0; lane < Dp_; ++lane) {
          const float acc = acc_[lm * static_cast<size_t>(Dp_) + static_cast<size_t>(lane)];
          const int64_t at = buf_index(h, row / qph_p_, row % qph_p_, lane);
          store_float(stored, bo_[bo_sem].data(), at, out(acc, l_[lm]));
          if (o_.enclosure) store_enclosure(bo_sem, at, stored, enc_rows_[lm].out(lane, qdt_));
        }
      }
    }
    start_send_bo(seq, bq_idx, bo_sem);
  }

  // An output element's enclosure, stored as `stored` into the q-dtype buffer: where those
  // differ (an out_dtype of q's width), only a determined value keeps its meaning.
  void store_enclosure(int b, int64_t at, DType stored, Range r) {
    if (stored != qdt_ && !(r.lo == r.hi)) r = {kNaN, kNaN};
    if (stored != qdt_ && !std::isnan(r.lo)) {
      std::array<std::byte, 4> bits{};
      store_float(stored, bits.data(), 0, static_cast<float>(r.lo));
      r.lo = r.hi = load_float(qdt_, bits.data(), 0);
    }
    bo_lo_[b][static_cast<size_t>(at)] = static_cast<float>(r.lo);
    bo_hi_[b][static_cast<size_t>(at)] = static_cast<float>(r.hi);
  }

  // The enclosure's q row: lanes of q buffer b, quantized (quantize_q is monotone, and
  // decreasing for a negative q_scale).
  void enclosure_q(int b, int64_t h, int64_t r, int64_t j, int64_t lanes) {
    enc_q_lo_.resize(static_cast<size_t>(lanes));
    enc_q_hi_.resize(static_cast<size_t>(lanes));
    for (int64_t lane = 0; lane < lanes; ++lane) {
      float lo = kNaN, hi = kNaN;
      if (r < bq_sz_) {
        const auto at = static_cast<size_t>(buf_index(h, r, j, lane));
        lo = quantize_q(bq_lo_[b][at]);
        hi = quantize_q(bq_hi_[b][at]);
      }
      enc_q_lo_[static_cast<size_t>(lane)] = std::min(lo, hi);
      enc_q_hi_[static_cast<size_t>(lane)] = std::max(lo, hi);
      if (std::isnan(lo) || std::isnan(hi)) enc_q_lo_[static_cast<size_t>(lane)] = kNaN;
    }
  }

  // alpha x + y in A: each operation rounded (the literal), or fused (a second run).
  float multiply_add(DType a, float alpha, float x, float y) const {
    if (second_.fused) return round_double_to(a, static_cast<double>(alpha) * x + y);
    return rnd(a, rnd(a, alpha * x) + y);
  }

  void count_step() {
    if (++steps_ > o_.max_steps) {
      throw V3ProgramError(Kind::kHang, "more than " + I(o_.max_steps) + " compute steps");
    }
  }

  // flash_attention_step1_qk_softmax and step2_pv of one kv head over rows [bq_start,
  // bq_start + bq_csz) of q buffer bq_sem and tokens [kv0, kv0 + bkv_csz) of KV buffer bkv_sem.
  void kernel_block(int bq_sem, int bkv_sem, int64_t h, int64_t bq_start, int64_t kv0,
                    int64_t q_pos0, int64_t k_pos0, int64_t effective) {
    const int64_t rows = bq_csz_ * qph_p_, n = bkv_csz_;
    const DType a = acc_dtype_;
    // K and V of the block, V zeroed past the effective length (unless skip_kv_mask).
    k_.resize(static_cast<size_t>(n * Dp_));
    v_.resize(static_cast<size_t>(n * Dp_));
    finite_.assign(static_cast<size_t>(n), 1);
    const int64_t q_base = pos(q_pos0), k_base = pos(k_pos0), eff = pos(effective);
    for (int64_t t = 0; t < n; ++t) {
      const int64_t k_span = pos(k_base + t);
      const bool v_kept = p_.skip_kv_mask || k_span < eff;
      for (int64_t lane = 0; lane < Dp_; ++lane) {
        k_[static_cast<size_t>(t * Dp_ + lane)] = kv_at(bkv_sem, kv0 + t, layout_.k_offset(h) + lane);
        const float v = v_kept ? kv_at(bkv_sem, kv0 + t, layout_.v_offset(h) + lane) : 0.0f;
        v_[static_cast<size_t>(t * Dp_ + lane)] = v;
        if (!std::isfinite(v)) finite_[static_cast<size_t>(t)] = 0;
      }
    }
    const float s_scale = float32_scalar(p_.sm_scale * p_.k_scale.value_or(1.0) * p_.q_scale.value_or(1.0));
    const std::optional<float> cap =
        p_.soft_cap ? std::optional<float>(float32_scalar(*p_.soft_cap)) : std::nullopt;
    const float mask_value = static_cast<float>(attention_math(d_, p_, qdt_).mask_value);
    const bool any_mask = causal_ || !p_.skip_kv_mask || p_.sliding_window.has_value();
    std::vector<float> q(static_cast<size_t>(Dp_)), s(static_cast<size_t>(n)), pv(static_cast<size_t>(Dp_));
    std::vector<unsigned char> kept(static_cast<size_t>(n), 1);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t token = bq_start + r / qph_p_, j = r % qph_p_;
      for (int64_t lane = 0; lane < Dp_; ++lane) {
        q[static_cast<size_t>(lane)] = quantize_q(q_at(bq_sem, h, token, j, lane));
      }
      const int64_t q_span = pos(q_base + pos(r / qph_p_));
      float row_max = -kInf;
      bool nan = false;
      for (int64_t t = 0; t < n; ++t) {
        bool keep = true;
        if (any_mask) {
          const int64_t k_span = pos(k_base + t);
          if (causal_) keep = keep && q_span >= k_span;
          if (!p_.skip_kv_mask) keep = keep && k_span < eff;
          if (p_.sliding_window) keep = keep && q_span < pos(k_span + *p_.sliding_window);
          kept[static_cast<size_t>(t)] = keep ? 1 : 0;
        }
        // A masked slot's logit is mask_value whatever its dot is: the dot is skipped.
        float x = mask_value;
        if (keep) {
          float dot = 0.0f;
          if (second_.order == V3DotOrder::kForward) {
            for (int64_t i = 0; i < Dp_; ++i) dot += q[static_cast<size_t>(i)] * k_[static_cast<size_t>(t * Dp_ + i)];
          } else {
            dot = ordered_dot(second_.order, Dp_, [&](int64_t i) {
              return static_cast<double>(q[static_cast<size_t>(i)]) * k_[static_cast<size_t>(t * Dp_ + i)];
            });
          }
          x = dot * s_scale;
          if (cap) x = *cap * nudge(std::tanh(x / *cap), second_.exp_ulps);
        }
        s[static_cast<size_t>(t)] = x;
        nan = nan || std::isnan(x);
        row_max = std::max(row_max, x);
      }
      if (nan) row_max = kNaN;
      const size_t lm = static_cast<size_t>(h * bq_sz_ * qph_p_ + bq_start * qph_p_ + r);
      const float m_prev = m_[lm];
      const float rounded_max = rnd(a, row_max);
      const float m_curr = (std::isnan(m_prev) || std::isnan(rounded_max)) ? kNaN : std::max(m_prev, rounded_max);
      m_[lm] = m_curr;
      std::vector<float> p(static_cast<size_t>(n));
      for (int64_t t = 0; t < n; ++t) {
        p[static_cast<size_t>(t)] = nudge(std::exp(s[static_cast<size_t>(t)] - m_curr), t % 2 == 0 ? second_.exp_ulps : -second_.exp_ulps);
      }
      std::vector<float> p_a(p.size());
      for (size_t t = 0; t < p.size(); ++t) p_a[t] = rnd(a, p[t]);
      float rowsum;
      if (second_.row_sum_once || (a == DType::kFloat32 && second_.order != V3DotOrder::kForward)) {
        rowsum = rnd(a, ordered_dot(second_.order, n, [&](int64_t i) { return static_cast<double>(p_a[static_cast<size_t>(i)]); }));
      } else {
        rowsum = xla_row_sum(std::move(p_a), a);
      }
      const float alpha = rnd(a, nudge(std::exp(rnd(a, m_prev - m_curr)), second_.exp_ulps));
      l_[lm] = multiply_add(a, alpha, l_[lm], rowsum);
      // step 2: acc = alpha * acc + (p V) * v_scale, each in out_dtype.
      std::fill(pv.begin(), pv.end(), 0.0f);
      if (second_.order == V3DotOrder::kForward) {
        for (int64_t t = 0; t < n; ++t) {
          const float w = p[static_cast<size_t>(t)];
          if (w == 0.0f && finite_[static_cast<size_t>(t)]) continue;  // adds zeros (see finite_)
          for (int64_t lane = 0; lane < Dp_; ++lane) pv[static_cast<size_t>(lane)] += w * v_[static_cast<size_t>(t * Dp_ + lane)];
        }
      } else {
        for (int64_t lane = 0; lane < Dp_; ++lane) {
          pv[static_cast<size_t>(lane)] = ordered_dot(second_.order, n, [&](int64_t t) {
            return static_cast<double>(p[static_cast<size_t>(t)]) * v_[static_cast<size_t>(t * Dp_ + lane)];
          });
        }
      }
      const std::optional<float> vs =
          p_.v_scale ? std::optional<float>(float32_scalar(*p_.v_scale)) : std::nullopt;
      float* acc = &acc_[lm * static_cast<size_t>(Dp_)];
      for (int64_t lane = 0; lane < Dp_; ++lane) {
        float x = pv[static_cast<size_t>(lane)];
        if (vs) x *= *vs;
        acc[lane] = multiply_add(a, alpha, acc[lane], rnd(a, x));
      }
      if (o_.enclosure) {
        enclosure_q(bq_sem, h, token, j, Dp_);
        V3EnclosureBlock eb;
        eb.q_lo = enc_q_lo_.data();
        eb.q_hi = enc_q_hi_.data();
        eb.qk_lanes = Dp_;
        eb.k = k_.data();
        eb.k_stride = Dp_;
        eb.v = v_.data();
        eb.v_stride = Dp_;
        eb.n = n;
        eb.scales = &s_scale;
        eb.nscales = 1;
        eb.cap = cap;
        eb.keep = kept.data();
        eb.mask_value = mask_value;
        eb.v_scale = vs;
        enc_rows_[lm].step(eb, o_.enclosure->terms, &max_abs_v_);
      }
    }
  }

  // -- kernel_hd64.py -------------------------------------------------------------------------
  void run_hd64() {
    if (!p_.num_kv_pages_per_block || !p_.num_queries_per_block) {
      throw std::invalid_argument(
          "the literal hd64 schedule needs num_kv_pages_per_block and num_queries_per_block "
          "(kernel_hd64's tuned tables are not in rpa)");
    }
    const int64_t bkv_p = *p_.num_kv_pages_per_block, bq_sz = *p_.num_queries_per_block;
    if (bkv_p <= 0 || bq_sz <= 0) {
      throw V3ProgramError(Kind::kTrace, "num_kv_pages_per_block and num_queries_per_block must be positive");
    }
    const int64_t bkv_sz = bkv_p * S_;
    if (bkv_sz % layout_.packing() != 0) {
      throw V3ProgramError(Kind::kTrace, "bkv_sz=" + I(bkv_sz) + " is not a multiple of the KV packing (an assertion)");
    }
    // prepare_inputs reshapes the sinks to (-1, qph_p): finding 22.
    if (in_.attention_sink) {
      // No q heads (a shape mutation): numpy cannot reshape to (-1, 0) either.
      if (qph_p_ == 0 || Hq_ % qph_p_ != 0) {
        throw V3ProgramError(Kind::kTrace, "attention_sink of " + I(Hq_) +
                                               " heads cannot be reshaped to (-1, " + I(qph_p_) + ")");
      }
      if (Hq_ / qph_p_ < Hkv_) {
        throw V3ProgramError(Kind::kRun, "attention_sink reshaped to (" + I(Hq_ / qph_p_) + ", " +
                                             I(qph_p_) + ") has no row for kv head " + I(Hq_ / qph_p_) +
                                             " (interpret mode raises IndexError)");
      }
    }
    allocate(bq_sz, bkv_sz);
    part_ = "hd64";
    if (o_.features && in_.distribution.int_at(2) > 0) hit("positions.int32");
    bkv_p_ = bkv_p;
    cost("cost.traced_page_copies", bkv_p_);
    cost("cost.traced_compute_bodies", Hkv_);
    const int64_t num_seqs = in_.distribution.int_at(2);
    const int64_t decode_end = in_.distribution.int_at(0), prefill_end = in_.distribution.int_at(1);
    range_start_ = 0;
    range_end_ = num_seqs;
    for (int64_t seq = 0; seq < num_seqs; ++seq) {
      const int64_t q_len = cu(seq + 1) - cu(seq), len = kv_len(seq);
      hd64_start_bkv_ = 0;
      next_seq_start_bkv_ = 0;
      if (p_.sliding_window) {
        const int64_t w = *p_.sliding_window;
        hd64_start_bkv_ = floordiv(std::max<int64_t>(len - q_len - w, 0), bkv_sz);
        const int64_t next = std::min(seq + 1, num_seqs - 1);
        const int64_t next_q_len = cu(next + 1) - cu(seq + 1);
        next_seq_start_bkv_ = floordiv(std::max<int64_t>(kv_len(next) - next_q_len - w, 0), bkv_sz);
      }
      if (seq == 0) {
        fetch_bq(0, 0, 0, false);
        std::fill(bkv_[0].begin(), bkv_[0].end(), std::byte{0});
        fetch_bkv(0, hd64_start_bkv_, 0, false);
        std::fill(bkv_[1].begin(), bkv_[1].end(), std::byte{0});
      }
      std::optional<int64_t> static_q_len;
      if (seq < decode_end) {
        static_q_len = 1;
      } else if (seq < prefill_end) {
        static_q_len = p_.chunk_prefill_size;
      }
      const int64_t actual_bq = static_q_len ? std::min(bq_sz, *static_q_len) : bq_sz;
      if (actual_bq <= 0) throw V3ProgramError(Kind::kTrace, "a query block of 0 rows");
      const int64_t num_bq = static_q_len ? cdiv(*static_q_len, actual_bq) : cdiv(q_len, actual_bq);
      const int64_t num_bkv = cdiv(len, bkv_sz);
      seq_features(seq, q_len, actual_bq, static_q_len);
      if (o_.features) {
        hit(seq < decode_end ? "segment.decode" : seq < prefill_end ? "segment.prefill" : "segment.mixed");
        if (p_.sliding_window && hd64_start_bkv_ > 0) hit("window.skips_blocks");
        writes_this_seq_ = 0;
      }
      for (int64_t bq_idx = 0; bq_idx < num_bq; ++bq_idx) {
        process_hd64_bq(seq, bq_idx, num_bq, num_bkv, actual_bq, num_seqs);
      }
      if (seq == num_seqs - 1) {
        for (int b = 0; b < 2; ++b) {
          wait_send_bo(b, seq);
          wait_update_kv_cache(b);
        }
      }
    }
  }

  void process_hd64_bq(int64_t seq, int64_t bq_idx, int64_t num_bq, int64_t num_bkv,
                       int64_t actual_bq, int64_t num_seqs) {
    const int bq_sem = static_cast<int>(sem_ids_[0]);
    {
      const bool last = bq_idx + 1 == num_bq;
      const int64_t nseq = last ? seq + 1 : seq, nbq = last ? 0 : bq_idx + 1;
      if (nseq < num_seqs) {
        sem_ids_[0] = bq_sem == 0 ? 1 : 0;
        fetch_bq(nseq, nbq, static_cast<int>(sem_ids_[0]), false);
      }
    }
    if (o_.features) {
      const int64_t len = kv_len(seq), q0 = len - (cu(seq + 1) - cu(seq)) + bq_idx * bq_sz_;
      const int64_t rows = std::min(actual_bq, cu(seq + 1) - cu(seq) - bq_idx * bq_sz_);
      window_features(q0, q0 + std::max<int64_t>(rows, 1) - 1, len);
      if (num_bkv <= hd64_start_bkv_) hit("kv_blocks.none");
      // Its int32 positions past int16's range (the long tier's calls alone).
      if (q0 + std::max<int64_t>(rows, 1) - 1 > 32767) hit("positions.past_int16");
    }
    for (int64_t bkv_idx = hd64_start_bkv_; bkv_idx < num_bkv; ++bkv_idx) {
      const int bkv_sem = static_cast<int>(sem_ids_[1]);
      const bool last_bkv = bkv_idx + 1 == num_bkv;
      const int64_t nbq = last_bkv ? bq_idx + 1 : bq_idx;
      const bool last_bq = nbq == num_bq;
      const int64_t nseq = last_bq ? seq + 1 : seq;
      int64_t start = 0;
      if (p_.sliding_window) start = last_bq ? next_seq_start_bkv_ : hd64_start_bkv_;
      const int64_t nbkv = last_bkv ? start : bkv_idx + 1;
      if (nseq < num_seqs) {
        sem_ids_[1] = bkv_sem == 0 ? 1 : 0;
        fetch_bkv(nseq, nbkv, static_cast<int>(sem_ids_[1]), false);
        prefetch_features(seq, bq_idx, nseq, nbq, nbkv);
      } else {
        hit("prefetch.none_past_range");
      }
      kv_block_features(bkv_idx, hd64_start_bkv_, num_bkv, kv_len(seq));
      if (bkv_idx == hd64_start_bkv_) fetch_bq(seq, bq_idx, bq_sem, true);
      const auto [offset, update_sz] = fetch_bkv(seq, bkv_idx, bkv_sem, true);
      if (update_sz > 0 && bq_idx == 0) start_update_kv_cache(seq, bkv_sem, offset, update_sz);
      count_step();
      if (!o_.compute) continue;
      for (int64_t h = 0; h < Hkv_; ++h) hd64_block(seq, bq_sem, bkv_sem, h, bq_idx, bkv_idx, actual_bq);
    }
    // out = acc / l (float32 q) or acc * reciprocal(l, approx=True) in q's dtype.
    // pltpu.reciprocal(l, approx=True) lowers to reciprocal(l as bfloat16) as float32, and
    // XLA's CPU backend keeps that quotient in float32 (measured: 124 of 256 output elements
    // of an hd64 decode call came out one bfloat16 apart with it rounded).
    send_output(seq, bq_idx, qdt_, [this](float acc, float l) {
      return qdt_ == DType::kFloat32 ? acc / l : acc * (1.0f / round_to(DType::kBFloat16, l));
    });
  }

  // flash_attention_step1 and step2 of kernel_hd64 for kv head h: every row of the query
  // block against the whole KV buffer, q . [K | V] over 128 lanes, p . [K | V].
  void hd64_block(int64_t seq, int bq_sem, int bkv_sem, int64_t h, int64_t bq_idx, int64_t bkv_idx,
                  int64_t actual_bq) {
    const int64_t rows = actual_bq * qph_p_, n = bkv_sz_;
    const bool first = bkv_idx == hd64_start_bkv_;
    k_.resize(static_cast<size_t>(n * 128));
    finite_.assign(static_cast<size_t>(n), 1);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t lane = 0; lane < 128; ++lane) {
        const float x = kv_at(bkv_sem, t, layout_.k_offset(h) + lane);
        k_[static_cast<size_t>(t * 128 + lane)] = x;
        if (!std::isfinite(x)) finite_[static_cast<size_t>(t)] = 0;
      }
    }
    const int64_t len = kv_len(seq), q_len = cu(seq + 1) - cu(seq);
    const float mask_value = static_cast<float>(p_.mask_value.value_or(kDefaultMaskValue));
    std::vector<float> q(128), s(static_cast<size_t>(n)), p(static_cast<size_t>(n)), pv(128);
    std::vector<unsigned char> kept(static_cast<size_t>(n), 1);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t j = r % qph_p_;
      for (int64_t lane = 0; lane < 128; ++lane) {
        q[static_cast<size_t>(lane)] = quantize_q(q_at(bq_sem, h, r / qph_p_, j, lane));
      }
      const int64_t q_span = static_cast<int32_t>(len - q_len + bq_idx * bq_sz_ + r / qph_p_);
      float row_max = -kInf;
      bool nan = false;
      for (int64_t t = 0; t < n; ++t) {
        const int64_t k_span = bkv_idx * bkv_sz_ + t;
        bool keep = k_span <= q_span;
        if (p_.sliding_window) keep = keep && q_span - *p_.sliding_window < k_span;
        kept[static_cast<size_t>(t)] = keep ? 1 : 0;
        // A masked slot's logit is mask_value whatever its dot is: the dot is skipped.
        float x = mask_value;
        if (keep) {
          x = 0.0f;
          if (second_.order == V3DotOrder::kForward) {
            for (int64_t i = 0; i < 128; ++i) x += q[static_cast<size_t>(i)] * k_[static_cast<size_t>(t * 128 + i)];
          } else {
            x = ordered_dot(second_.order, 128, [&](int64_t i) {
              return static_cast<double>(q[static_cast<size_t>(i)]) * k_[static_cast<size_t>(t * 128 + i)];
            });
          }
          x *= float32_scalar(p_.sm_scale);
          if (p_.k_scale) x *= float32_scalar(*p_.k_scale);
          if (p_.q_scale) x *= float32_scalar(*p_.q_scale);
          if (p_.soft_cap) {
            const float cap = float32_scalar(*p_.soft_cap);
            x = cap * nudge(std::tanh(x / cap), second_.exp_ulps);
          }
        }
        s[static_cast<size_t>(t)] = x;
        nan = nan || std::isnan(x);
        row_max = std::max(row_max, x);
      }
      if (nan) row_max = kNaN;
      const size_t lm = static_cast<size_t>(h * bq_sz_ * qph_p_ + r);
      float m_prev;
      if (in_.attention_sink) {
        m_prev = first ? reinterpret_cast<const float*>(in_.attention_sink->data())[h * qph_p_ + j] : m_[lm];
      } else {
        m_prev = first ? -kInf : m_[lm];
      }
      const float m_curr = (std::isnan(m_prev) || std::isnan(row_max)) ? kNaN : std::max(m_prev, row_max);
      m_[lm] = m_curr;
      for (int64_t t = 0; t < n; ++t) {
        p[static_cast<size_t>(t)] = nudge(std::exp(s[static_cast<size_t>(t)] - m_curr), t % 2 == 0 ? second_.exp_ulps : -second_.exp_ulps);
      }
      const float rowsum = second_.order == V3DotOrder::kForward
                               ? xla_row_sum(p, DType::kFloat32)
                               : ordered_dot(second_.order, n, [&](int64_t i) { return static_cast<double>(p[static_cast<size_t>(i)]); });
      const float alpha = nudge(std::exp(m_prev - m_curr), second_.exp_ulps);
      const float l_prev = first ? 1.0f : l_[lm];
      l_[lm] = multiply_add(DType::kFloat32, alpha, l_prev, rowsum);
      float* acc = &acc_[lm * 128];
      // p . [K | V]: each lane sums over t in order; t outer keeps the rows of k_ in cache.
      std::fill(pv.begin(), pv.end(), 0.0f);
      if (second_.order == V3DotOrder::kForward) {
        for (int64_t t = 0; t < n; ++t) {
          const float w = p[static_cast<size_t>(t)];
          if (w == 0.0f && finite_[static_cast<size_t>(t)]) continue;  // adds zeros (see finite_)
          for (int64_t lane = 0; lane < 128; ++lane) pv[static_cast<size_t>(lane)] += w * k_[static_cast<size_t>(t * 128 + lane)];
        }
      } else {
        for (int64_t lane = 0; lane < 128; ++lane) {
          pv[static_cast<size_t>(lane)] = ordered_dot(second_.order, n, [&](int64_t t) {
            return static_cast<double>(p[static_cast<size_t>(t)]) * k_[static_cast<size_t>(t * 128 + lane)];
          });
        }
      }
      for (int64_t lane = 0; lane < 128; ++lane) {
        float x = pv[static_cast<size_t>(lane)];
        if (p_.v_scale) x *= float32_scalar(*p_.v_scale);
        const float prev = first ? 0.0f : acc[lane];
        acc[lane] = multiply_add(DType::kFloat32, alpha, prev, x);
      }
      if (o_.enclosure) {
        if (first) enc_rows_[lm].start(DType::kFloat32, true, 128, m_prev, 1.0f);
        enclosure_q(bq_sem, h, r / qph_p_, j, 128);
        std::array<float, 3> scales{};
        int nscales = 0;
        scales[static_cast<size_t>(nscales++)] = float32_scalar(p_.sm_scale);
        if (p_.k_scale) scales[static_cast<size_t>(nscales++)] = float32_scalar(*p_.k_scale);
        if (p_.q_scale) scales[static_cast<size_t>(nscales++)] = float32_scalar(*p_.q_scale);
        V3EnclosureBlock eb;
        eb.q_lo = enc_q_lo_.data();
        eb.q_hi = enc_q_hi_.data();
        eb.qk_lanes = 128;
        eb.k = k_.data();
        eb.k_stride = 128;
        eb.v = k_.data();
        eb.v_stride = 128;
        eb.n = n;
        eb.scales = scales.data();
        eb.nscales = nscales;
        if (p_.soft_cap) eb.cap = float32_scalar(*p_.soft_cap);
        eb.keep = kept.data();
        eb.mask_value = mask_value;
        if (p_.v_scale) eb.v_scale = float32_scalar(*p_.v_scale);
        enc_rows_[lm].step(eb, o_.enclosure->terms, &max_abs_v_);
      }
    }
  }

  const Dialect d_;
  const bool hd64_;
  const V3Inputs& in_;
  const V3Params& p_;
  const V3ProgramOptions o_;
  const V3SecondRun second_ = o_.second_run;
  const DType qdt_, kvdt_, acc_dtype_;
  const int64_t T_, Hq_, D_, Hkv_;
  const V3CacheLayout layout_;
  const int64_t Dp_, qpack_, qph_, qph_p_, pages_, S_, N_, npi_, pps_, qe_, rec_, rec_bytes_;
  Tensor cache_;                 // the cache (input and output: the call aliases them)
  std::vector<std::byte> qo_;    // q and the output: [Hkv, T, qph_p, Dp] in q's dtype
  std::vector<std::byte> new_kv_;  // merge_kv(keys, values): [T] records

  // One pallas_call's scratch and state.
  int64_t bq_sz_ = 0, bkv_sz_ = 0, bkv_p_ = 0, bq_csz_ = 0, bkv_csz_ = 0;
  int64_t range_start_ = 0, range_end_ = 0, next_seq_start_bkv_ = 0, hd64_start_bkv_ = 0;
  bool causal_ = true, int16_positions_ = false;
  std::string part_ = "call";  // the pass running now, for the path features
  int64_t kv_len_now_ = 0, writes_this_seq_ = 0;
  std::vector<std::byte> bkv_[2], bq_[2], bo_[2];
  std::vector<float> l_, m_, acc_;  // [Hkv, bq_sz * qph_p] (acc: x Dp), in the accumulation dtype
  Semaphore sems_[4][2];            // fetch KV, fetch q, send out, write cache; x2 halves
  std::array<int64_t, 3> sem_ids_{};
  std::array<int64_t, 4> bo_ids_{};
  std::array<int64_t, 6> bkv_update_ids_{};
  int64_t steps_ = 0;
  std::vector<float> k_, v_;  // the block's K and V (hd64: [K | V])
  // Per slot of the block: 1 where its V row (hd64: its [K | V] row) is finite. A weight of 0
  // there adds a +-0 product to p.V, which leaves the sum as it is (the sum starts at +0 and
  // round-to-nearest never makes -0 of it), so the forward order skips it; a slot with an inf
  // or NaN is summed (0 * inf is NaN).
  std::vector<unsigned char> finite_;
  // The enclosure (V3ProgramOptions::enclosure): q / out and its buffers' lo and hi, per
  // element; each scratch row's state; the quantized q row being worked on.
  std::vector<float> qo_lo_, qo_hi_, bq_lo_[2], bq_hi_[2], bo_lo_[2], bo_hi_[2];
  std::vector<V3RowEnclosure> enc_rows_;
  std::vector<float> enc_q_lo_, enc_q_hi_;
  double max_abs_v_ = 0.0;
};

}  // namespace

const char* v3_program_error_kind_name(V3ProgramError::Kind k) {
  switch (k) {
    case Kind::kTrace: return "trace";
    case Kind::kRun: return "run";
    case Kind::kHang: return "hang";
  }
  return "run";
}

V3BlockSizes v3_pass_block_sizes(const V3Inputs& in, const V3Params& p, V3Pass pass, int tpu_version) {
  if (const std::optional<V3BlockSizes> b = v3_block_sizes(in, p, pass, tpu_version)) return *b;
  throw V3ProgramError(Kind::kTrace, "no block sizes for the " +
                                         std::string(pass == V3Pass::kDecode    ? "decode"
                                                     : pass == V3Pass::kPrefill ? "prefill"
                                                                                : "mixed") +
                                         " pass and no TPU generation (Unsupported tpu_version=" +
                                         I(tpu_version) + ".)");
}

V3KernelResult v3_literal_attention(Dialect d, const V3Inputs& in, const V3Params& p,
                                    const V3ProgramOptions& options) {
  if (!is_v3(d)) throw std::invalid_argument("v3_literal_attention: not a v3 dialect");
  for (DType t : {in.queries.dtype(), in.kv_cache.dtype()}) {
    if (!is_kernel_kv_dtype(t)) {
      throw std::invalid_argument("the literal v3 schedule computes float32, bfloat16 and float8 "
                                  "only, not " + std::string(dtype_name(t)));
    }
  }
  const DType out = d == Dialect::kTpuInferenceV3Hd64
                        ? in.queries.dtype()
                        : p.out_dtype.value_or(v3_default_out_dtype(in.queries.dtype()));
  if (!is_kernel_kv_dtype(out) || dtype_bits(out) != dtype_bits(in.queries.dtype())) {
    throw V3ProgramError(Kind::kTrace, "out_dtype " + std::string(dtype_name(out)) +
                                           " does not bitcast into the " +
                                           std::string(dtype_name(in.queries.dtype())) +
                                           " output buffer");
  }
  if (in.keys.rank() != 3 || in.queries.rank() != 3 || in.kv_lens.dim(0) <= 0) {
    throw std::invalid_argument("v3_literal_attention: malformed call (validate first)");
  }
  Program program(d, in, p, options);
  return program.run();
}

PathFeatures v3_path_features(Dialect d, const V3Inputs& in, const V3Params& p, int tpu_version) {
  PathFeatures f;
  try {
    v3_literal_attention(d, in, p, {.tpu_version = tpu_version, .features = &f, .compute = false});
  } catch (const V3ProgramError& e) {
    f.hit(std::string("stops.") + v3_program_error_kind_name(e.kind()));
  } catch (const std::invalid_argument&) {
    // What the literal schedule does not model: hd64 without block sizes, a fetch block of
    // no tokens.
    f.hit(d == Dialect::kTpuInferenceV3Hd64 && !p.num_kv_pages_per_block ? "stops.hd64_untuned"
                                                                         : "stops.not_modelled");
  } catch (const std::bad_alloc&) {
    // Buffers of blocks near 2^31 (a native call's block sizes): more than this machine holds.
    f.hit("stops.too_large_to_walk");
  } catch (const std::length_error&) {
    f.hit("stops.too_large_to_walk");
  }
  return f;
}

}  // namespace rpa
