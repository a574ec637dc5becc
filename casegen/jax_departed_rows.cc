#include "casegen/jax_departed_rows.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "schedule/jax_program.h"

namespace rpa::props {
namespace {

// Marks the rows of every departure (schedule/jax_program.h's DepartureVisitor): a step over a
// stale block marks every row it stores (the sequence's later steps in the cell fold into
// the same accumulator rows), an unstored defined row keeps what the accumulator held.
class Marker : public DepartureVisitor {
 public:
  Marker(const Inputs& in, const PallasGrid& grid, DepartedRows& rows)
      : DepartureVisitor(in, grid), rows_(rows) {}

 private:
  void departed_step(int64_t qb, const KvBlockId& want, const KvBlockId&, int64_t store_lo,
                     int64_t store_hi) override {
    const int64_t r0 = qb * grid_.queries_per_block;
    const int64_t end = std::min(r0 + store_hi, in_.q.dim(0));
    for (int64_t r = r0 + std::max<int64_t>(store_lo, 0); r < end; ++r) mark(r, want.heads_blk);
  }
  void unstored_rows(int64_t hb, int64_t, int64_t first, int64_t last) override {
    for (int64_t r = first; r <= last; ++r) mark(r, hb);
  }
  void mark(int64_t row, int64_t hb) {
    rows_.departed[static_cast<size_t>(row * grid_.num_heads_blks + hb)] = 1;
  }

  DepartedRows& rows_;
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
