#include "schedule/jax_program.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>


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
