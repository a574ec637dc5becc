#include "schedule/jax_program.h"

#include <algorithm>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "core/dtype.h"


namespace rpa {
namespace {

// int32 arithmetic as the kernel does it on the TPU: wrapping.
int32_t add32(int64_t a, int64_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}
int32_t sub32(int64_t a, int64_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) - static_cast<uint32_t>(b));
}
int32_t mul32(int64_t a, int64_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
}

// pl.cdiv on int32 scalars: lax.div(a + (b - 1), b), which truncates toward zero. (b is a
// page size: jax mode rejects one past int32, which the kernel cannot trace; the int64
// division keeps this defined all the same.)
int32_t cdiv32(int64_t a, int64_t b) {
  const int32_t sum = add32(a, b - 1);
  return static_cast<int32_t>(sum / b);
}

const int32_t* ints(const Tensor& t) { return reinterpret_cast<const int32_t*>(t.data()); }

}  // namespace

bool kv_loop_wraps_int32(int64_t kv_len, int64_t block_tokens) {
  if (kv_len <= 0) return false;
  const int64_t blocks = (kv_len + block_tokens - 1) / block_tokens;
  return blocks * block_tokens > std::numeric_limits<int32_t>::max();
}

int64_t dma_page_column(const Inputs& in, int64_t bkv, const KvBlockId& id, int64_t i) {
  const int64_t pps = in.page_indices.dim(1);
  const int64_t S = in.kv_pages.dim(1);
  const int64_t end = std::min<int64_t>(pps, cdiv32(ints(in.kv_lens)[id.seq], S));
  const int64_t column = add32(mul32(id.kv_blk, bkv), i);
  return column < end ? column : 0;
}

bool walk_pallas_program(const Inputs& in, const PallasGrid& g, PallasProgramVisitor& v,
                         int64_t max_steps) {
  const int32_t* kv_lens = ints(in.kv_lens);
  const int32_t* cu = ints(in.cu_q_lens);
  const int64_t num_seqs = ints(in.num_seqs)[0];
  const int64_t S = in.kv_pages.dim(1);
  const int64_t bq = g.queries_per_block;
  const int64_t kv_per_blk = g.kv_pages_per_block * S;
  const int64_t total = cu[num_seqs];
  int pending[2] = {0, 0};
  auto dma = [&](int buf, const KvBlockId& id) {
    ++pending[buf];
    v.dma(buf, id);
  };
  int64_t steps = 0;
  int64_t carry_seq = 0;
  int carry_buf = 0;
  for (int64_t hb = 0; hb < g.num_heads_blks; ++hb) {
    for (int64_t qb = 0; qb < g.num_q_blks; ++qb) {
      const int32_t lo = mul32(qb, bq);
      const int32_t hi = add32(lo, bq);
      int64_t seq = carry_seq;
      int buf = carry_buf;
      if (hb + qb == 0) dma(buf, {hb, seq, 0});
      bool done = false;
      while (!done && lo < total && seq < num_seqs) {
        const int32_t q_start = cu[seq];
        const int32_t q_end = cu[seq + 1];
        const int32_t kv_len = kv_lens[seq];
        for (int64_t kv_blk = 0; mul32(kv_blk, kv_per_blk) < kv_len; ++kv_blk) {
          if (++steps > max_steps) return false;
          // get_next_prefetch_ids
          int64_t next_kv = kv_blk + 1;
          const bool last_kv = mul32(next_kv, kv_per_blk) >= kv_len;
          if (last_kv) next_kv = 0;
          int64_t next_seq = last_kv && q_end <= hi ? seq + 1 : seq;
          const bool last_seq = next_seq == num_seqs;
          if (last_seq) next_seq = 0;
          const int64_t next_hb = last_seq ? hb + 1 : hb;
          const int next_buf = buf == 0 ? 1 : 0;
          if (next_hb < g.num_heads_blks) dma(next_buf, {next_hb, next_seq, next_kv});
          const int64_t store_lo = std::max<int32_t>(sub32(q_start, lo), 0);
          const int64_t store_hi = std::min<int64_t>(sub32(q_end, lo), bq);
          const int waiting = pending[buf];
          if (pending[buf] > 0) --pending[buf];
          v.step(hb, qb, seq, kv_blk, buf, store_lo, store_hi, waiting);
          buf = next_buf;
        }
        const int64_t next_seq = q_end <= hi ? seq + 1 : seq;
        done = q_end >= hi;
        seq = next_seq;
      }
      carry_seq = seq < num_seqs ? seq : 0;
      carry_buf = buf;
      v.cell_end(hb, qb);
    }
  }
  return true;
}

namespace {

class FeatureVisitor : public PallasProgramVisitor {
 public:
  FeatureVisitor(const Inputs& in, const Params& p, const PallasGrid& g, PathFeatures& f)
      : in_(in), p_(p), g_(g), f_(f), S_(in.kv_pages.dim(1)),
        total_(ints(in.cu_q_lens)[ints(in.num_seqs)[0]]) {}

  void dma(int buf, const KvBlockId& id) override {
    f_.hit("cost.run_page_copies", g_.kv_pages_per_block);
    if (id.heads_blk != hb_ && started_) f_.hit("prefetch.next_heads_block");
    held_[buf] = id;
  }
  void step(int64_t hb, int64_t qb, int64_t seq, int64_t kv_blk, int buf, int64_t store_lo,
            int64_t store_hi, int /*pending*/) override {
    started_ = true;
    hb_ = hb;
    const int64_t kv_len = ints(in_.kv_lens)[seq], block = g_.kv_pages_per_block * S_;
    const int64_t blocks = (kv_len + block - 1) / block;
    f_.hit(std::string("kv_block.") + block_run_kind(kv_blk, 0, blocks));
    if (kv_blk + 1 == blocks && kv_len % block != 0) f_.hit("kv_block.partial_last");
    if (kv_blk + 1 == blocks && kv_len % S_ != 0) f_.hit("kv_block.partial_last_page");
    if (!(held_[buf] == KvBlockId{hb, seq, kv_blk})) f_.hit("step.buffer_holds_another_block");
    if (store_lo >= store_hi) {
      f_.hit("step.stores_no_row");
      return;
    }
    seqs_.insert(seq);
    const int64_t lo = qb * g_.queries_per_block;
    for (int64_t r = store_lo; r < store_hi; ++r) stored_.insert(lo + r);
    const int64_t q_start = ints(in_.cu_q_lens)[seq], q_end = ints(in_.cu_q_lens)[seq + 1];
    if (kv_blk == 0 && (q_start < lo + store_lo || q_end > lo + store_hi)) {
      f_.hit("seq.spans_q_blocks");
    }
    if (kv_blk == 0 && p_.sliding_window) {
      // The first stored row's position, and its first kept key (masked: q - W >= k).
      const int64_t q0 = kv_len - (q_end - q_start) + (lo + store_lo - q_start);
      f_.hit(std::string("window.") + window_start_kind(q0 - *p_.sliding_window + 1, block, kv_len));
    }
  }
  void cell_end(int64_t /*hb*/, int64_t qb) override {
    if (seqs_.size() > 1) f_.hit("q_block.spans_sequences");
    const int64_t lo = qb * g_.queries_per_block;
    const int64_t end = std::min({lo + g_.queries_per_block, total_, in_.q.dim(0)});
    for (int64_t r = lo; r < end; ++r) {
      if (!stored_.count(r)) {
        f_.hit("cell.leaves_rows_unstored");
        break;
      }
    }
    if (lo < total_ && end - lo < g_.queries_per_block) f_.hit("q_block.partial_last");
    seqs_.clear();
    stored_.clear();
  }

 private:
  const Inputs& in_;
  const Params& p_;
  const PallasGrid g_;
  PathFeatures& f_;
  const int64_t S_, total_;
  KvBlockId held_[2];
  int64_t hb_ = 0;
  bool started_ = false;
  std::set<int64_t> seqs_, stored_;
};

}  // namespace

PathFeatures jax_path_features(const Inputs& in, const Params& p, const PallasGrid& grid) {
  PathFeatures f;
  f.hit("dtype.q." + std::string(dtype_name(in.q.dtype())));
  f.hit("dtype.kv." + std::string(dtype_name(in.kv_pages.dtype())));
  if (p.k_scale) f.hit("scale.k");
  if (p.v_scale) f.hit("scale.v");
  if (p.soft_cap) f.hit("soft_cap");
  if (p.sliding_window) f.hit("window");
  if (p.mask_value) f.hit("mask_value.set");
  if (grid.num_heads_blks > 1) f.hit("heads_blocks.several");
  if (grid.num_q_blks > 1) f.hit("q_blocks.several");
  const int64_t num_seqs = ints(in.num_seqs)[0], S = in.kv_pages.dim(1);
  const int64_t block = grid.kv_pages_per_block * S;
  if (num_seqs < in.kv_lens.dim(0)) f.hit("seqs.slots_unused");
  if (ints(in.cu_q_lens)[num_seqs] < in.q.dim(0)) f.hit("rows.padding_past_last_sequence");
  int64_t most = 0;
  for (int64_t i = 0; i < num_seqs; ++i) {
    const int64_t kv_len = ints(in.kv_lens)[i];
    const int64_t q_len = ints(in.cu_q_lens)[i + 1] - ints(in.cu_q_lens)[i];
    if (kv_len == 0) f.hit("seq.kv_len_zero");
    if (q_len == 0) f.hit("seq.q_len_zero");
    if (kv_len > 0 && kv_len == q_len) f.hit("seq.no_cached_tokens");
    if (kv_len % S != 0) f.hit("seq.partial_last_page");
    most = std::max(most, (kv_len + block - 1) / block * block);
  }
  f.hit(std::string("positions.int32.") +
        wrap_margin_bucket(std::numeric_limits<int32_t>::max() - most));
  // What the call costs in TPU interpret mode (path_features.h): the DMA descriptor's static
  // loop over the pages of a KV block, traced once.
  f.hit("cost.traced_page_copies", grid.kv_pages_per_block);
  FeatureVisitor v(in, p, grid, f);
  if (!walk_pallas_program(in, grid, v, int64_t{1} << 22)) f.hit("stops.hang");
  return f;
}

DepartureVisitor::DepartureVisitor(const Inputs& in, const PallasGrid& grid)
    : in_(in),
      grid_(grid),
      T_(in.q.dim(0)),
      total_(in.cu_q_lens.int_at(in.num_seqs.int_at(0))),
      stored_(static_cast<size_t>(std::min(grid.queries_per_block, std::max<int64_t>(T_, 1)))) {}

void DepartureVisitor::dma(int buf, const KvBlockId& id) {
  held_[buf] = id;
  on_dma(id);
}

void DepartureVisitor::step(int64_t hb, int64_t qb, int64_t seq, int64_t kv_blk, int buf,
                            int64_t store_lo, int64_t store_hi, int /*pending*/) {
  if (store_lo >= store_hi) return;
  const auto rows = static_cast<int64_t>(stored_.size());
  for (int64_t r = std::max<int64_t>(store_lo, 0); r < std::min(store_hi, rows); ++r) {
    stored_[static_cast<size_t>(r)] = 1;
  }
  const KvBlockId want{hb, seq, kv_blk};
  const KvBlockId& have = held_[buf];
  if (have == want || same_pages(have, want)) return;
  departed_step(qb, want, have, store_lo, store_hi);
}

void DepartureVisitor::cell_end(int64_t hb, int64_t qb) {
  const int64_t lo = qb * grid_.queries_per_block;
  const int64_t end = std::min({lo + grid_.queries_per_block, total_, T_});
  for (int64_t r = lo; r < end; ++r) {
    if (stored_[static_cast<size_t>(r - lo)]) continue;
    int64_t last = r;
    while (last + 1 < end && !stored_[static_cast<size_t>(last + 1 - lo)]) ++last;
    unstored_rows(hb, qb, r, last);
    r = last;
  }
  std::fill(stored_.begin(), stored_.end(), 0);
}

int64_t DepartureVisitor::page_at(int64_t seq, int64_t column) const {
  return in_.page_indices.int_at(seq * in_.page_indices.dim(1) + column);
}

bool DepartureVisitor::same_pages(const KvBlockId& have, const KvBlockId& want) const {
  if (have.heads_blk != want.heads_blk) return false;
  const int64_t bkv = grid_.kv_pages_per_block, S = in_.kv_pages.dim(1);
  const int64_t valid = in_.kv_lens.int_at(want.seq) - want.kv_blk * bkv * S;
  for (int64_t i = 0; i < bkv && i * S < valid; ++i) {
    if (page_at(have.seq, dma_page_column(in_, bkv, have, i)) !=
        page_at(want.seq, dma_page_column(in_, bkv, want, i))) {
      return false;
    }
  }
  return true;
}

}  // namespace rpa
