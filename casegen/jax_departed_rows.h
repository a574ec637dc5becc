// Where the literal schedule (the Pallas program, schedule/jax_program.h) may leave the
// definition on an input that is valid by it: the output rows of each heads block that a
// grid cell computes over a buffer half holding another KV block than the step's own
// (stale_kv_block), or never stores (rows_not_computed). Everywhere else the literal
// schedule computes the definition, which the properties and fuzz_differential check on
// every generated case, also where strict mode rejects it for the departure.
#pragma once

#include <cstdint>
#include <vector>

#include "core/jax_inputs.h"
#include "core/jax_params.h"
#include "core/tensor.h"
#include "kernel/jax_kernel.h"

namespace rpa::props {

struct DepartedRows {
  int64_t num_heads_blks = 0;
  int64_t q_heads_per_blk = 0;
  // [T * num_heads_blks]: row r of heads block hb at r * num_heads_blks + hb.
  std::vector<char> departed;
  bool any() const;
  bool at(int64_t row, int64_t heads_blk) const {
    return departed[static_cast<size_t>(row * num_heads_blks + heads_blk)] != 0;
  }
};

// Walks the program with the grid the literal schedule plans for `options`. A step over a
// stale block marks every row it stores in its grid cell (the sequence's later steps there
// fold into the same accumulator rows); a defined row no step of a cell stores keeps what
// the accumulator held. Exactly the departures strict mode rejects (stale_kv_block,
// rows_not_computed), all of them rather than the first. Precondition: what the literal schedule needs (jax
// validation accepts; strict for options.untuned_blocks false).
DepartedRows departed_rows(const Inputs& in, const Params& params, const KernelOptions& options);

// `out` with the departed rows' elements (every query head of their heads blocks) taken
// from `from`, both of q's shape and dtype: what remains of `out` must be the definition.
Tensor with_departed_rows_from(const Tensor& out, const Tensor& from, const DepartedRows& rows);

}  // namespace rpa::props
