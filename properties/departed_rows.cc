#include "properties/departed_rows.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "kernel/pallas_program.h"

namespace rpa::props {
namespace {

// Follows the walk as ProgramCheck (kernel/pallas_program.cc) does, marking rows instead
// of stopping at the first departure.
class Marker : public PallasProgramVisitor {
 public:
  Marker(const Inputs& in, const PallasGrid& grid, DepartedRows& rows)
      : grid_(grid),
        rows_(rows),
        T_(in.q.dim(0)),
        total_(in.cu_q_lens.int_at(in.num_seqs.int_at(0))),
        stored_(static_cast<size_t>(grid.queries_per_block < T_ ? grid.queries_per_block : T_)) {}

  void dma(int buf, const KvBlockId& id) override { held_[buf] = id; }

  void step(int64_t hb, int64_t qb, int64_t seq, int64_t kv_blk, int buf, int64_t store_lo,
            int64_t store_hi, int /*pending*/) override {
    const bool stale = !(held_[buf] == KvBlockId{hb, seq, kv_blk});
    const auto rows = static_cast<int64_t>(stored_.size());
    for (int64_t r = std::max<int64_t>(store_lo, 0); r < std::min(store_hi, rows); ++r) {
      stored_[static_cast<size_t>(r)] = 1;
      if (stale) mark(qb * grid_.queries_per_block + r, hb);
    }
  }

  void cell_end(int64_t hb, int64_t qb) override {
    const int64_t lo = qb * grid_.queries_per_block;
    const int64_t end = std::min({lo + grid_.queries_per_block, total_, T_});
    for (int64_t r = lo; r < end; ++r) {
      if (!stored_[static_cast<size_t>(r - lo)]) mark(r, hb);
    }
    std::fill(stored_.begin(), stored_.end(), 0);
  }

 private:
  void mark(int64_t row, int64_t hb) {
    rows_.departed[static_cast<size_t>(row * grid_.num_heads_blks + hb)] = 1;
  }

  const PallasGrid grid_;
  DepartedRows& rows_;
  const int64_t T_, total_;
  KvBlockId held_[2];
  std::vector<char> stored_;  // rows of the current query block some step stored
};

}  // namespace

bool DepartedRows::any() const {
  return std::any_of(departed.begin(), departed.end(), [](char c) { return c != 0; });
}

DepartedRows departed_rows(const Inputs& in, const Params& params, const KernelOptions& options) {
  const KernelPlan plan =
      plan_kernel(in, params, options.target, options.literal_schedule && options.untuned_blocks);
  DepartedRows rows{
      .num_heads_blks = plan.num_heads_blks,
      .q_heads_per_blk = plan.heads.q_heads,
      .departed = std::vector<char>(static_cast<size_t>(in.q.dim(0) * plan.num_heads_blks), 0)};
  const PallasGrid grid{.num_heads_blks = plan.num_heads_blks,
                        .num_q_blks = plan.num_q_blks,
                        .kv_pages_per_block = plan.blocks.kv_pages_per_block,
                        .queries_per_block = plan.blocks.queries_per_block};
  Marker marker(in, grid, rows);
  walk_pallas_program(in, grid, marker, std::numeric_limits<int64_t>::max());
  return rows;
}

Tensor with_departed_rows_from(const Tensor& out, const Tensor& from, const DepartedRows& rows) {
  Tensor patched = out;
  const int64_t T = out.dim(0), Hq = out.dim(1), D = out.dim(2);
  const int64_t size = dtype_size(out.dtype());
  const int64_t block_bytes = rows.q_heads_per_blk * D * size;
  for (int64_t r = 0; r < T; ++r) {
    for (int64_t hb = 0; hb < rows.num_heads_blks; ++hb) {
      if (!rows.at(r, hb)) continue;
      const int64_t offset = (r * Hq + hb * rows.q_heads_per_blk) * D * size;
      std::memcpy(patched.data() + offset, from.data() + offset, static_cast<size_t>(block_bytes));
    }
  }
  return patched;
}

}  // namespace rpa::props
