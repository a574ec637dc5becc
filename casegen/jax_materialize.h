// From a CaseSpec to the arrays of one call (DESIGN.md section 1: one materialize()).
#pragma once

#include <cstdint>
#include <vector>

#include "core/jax_inputs.h"
#include "core/jax_params.h"
#include "casegen/jax_case_spec.h"
#include "casegen/jax_mutation.h"

namespace rpa::props {

struct Materialized {
  Inputs inputs;
  Params params;
  std::vector<Declared> declared;  // what the mutations make each mode report
};

// What goes into q and kv_pages. Validation never reads them, so a caller that only
// validates (fuzz_validate) can skip drawing them: kZeros makes both Tensor::shared_zeros,
// zeros that allocate nothing (core/shared_zeros.h) until something writes to them.
enum class Contents : uint8_t { kData, kZeros };

// Builds the valid case, then applies the spec's mutations (apply_mutations).
// Deterministic: the same spec gives the same bytes.
Materialized materialize(const CaseSpec& spec, Contents contents = Contents::kData);

// The valid case alone: spec's mutations are ignored.
Materialized materialize_valid(const CaseSpec& spec, Contents contents = Contents::kData);

// Applies spec's mutations to its materialized valid case: the shape one first, then the
// parameter ones in table order, so that each declares its failure on the final arrays.
void apply_mutations(const CaseSpec& spec, Materialized& m);

// Whether KV slot `slot` of page `page` holds a token some sequence reads.
std::vector<bool> read_kv_slots(const CaseSpec& spec);

}  // namespace rpa::props
