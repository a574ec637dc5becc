// From a CaseSpec to the arrays of one call (DESIGN.md section 1: one materialize()).
#pragma once

#include <vector>

#include "kernel/inputs.h"
#include "kernel/params.h"
#include "properties/case_spec.h"
#include "properties/mutation.h"

namespace rpa::props {

struct Materialized {
  Inputs inputs;
  Params params;
  std::vector<Declared> declared;  // what the mutations make each mode report
};

// Builds the valid case, then applies the spec's mutations (apply_mutations).
// Deterministic: the same spec gives the same bytes.
Materialized materialize(const CaseSpec& spec);

// The valid case alone: spec's mutations are ignored.
Materialized materialize_valid(const CaseSpec& spec);

// Applies spec's mutations to its materialized valid case: the shape one first, then the
// parameter ones in table order, so that each declares its failure on the final arrays.
void apply_mutations(const CaseSpec& spec, Materialized& m);

// Whether KV slot `slot` of page `page` holds a token some sequence reads.
std::vector<bool> read_kv_slots(const CaseSpec& spec);

}  // namespace rpa::props
