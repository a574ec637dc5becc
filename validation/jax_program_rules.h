// The rules validation reads off the Pallas program's walk (schedule/jax_program.h): a DMA of
// an out-of-range page, a step computing over a stale KV block, rows a grid cell never stores.
#pragma once

#include <cstdint>
#include <optional>

#include "core/jax_inputs.h"
#include "schedule/jax_program.h"
#include "validation/jax_rule.h"

namespace rpa {

// The first step of the walk that goes wrong in the mode, or nullopt. A DMA of a page
// index outside [-P, P) in jax mode, where TPU interpret mode raises IndexError (numpy
// indexing takes -P..-1 from the end; a TPU reads outside kv_pages), outside [0, P) in
// strict mode (page_index_out_of_range). strict mode also: a step storing
// defined rows computes over a buffer holding another KV block than its own, with other
// pages or heads in a slot it reads (stale_kv_block), or a grid cell leaves defined rows of
// its query block unstored (rows_not_computed). Validation and the spec model both ask
// this; the jax label checks the walk itself against the Pallas kernel. At most max_steps
// steps are walked (past them: nullopt).
std::optional<Failure> pallas_program_failure(const Inputs& in, const PallasGrid& grid, Mode mode,
                                              int64_t max_steps);

}  // namespace rpa
