// How fuzz_validate and fuzz_differential read a jax input's bytes (the untagged ones,
// harness/target_inputs.h): the build options (their size caps) and, for fuzz_differential,
// the kernel options drawn before the case; and a jax production call's mutations. Shared
// with the seed writer (write_seeds.cc), so each seed decodes to the case it was written from.
// Both go through the properties' one decoder, ByteSource + visit_case.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "casegen/jax_build_case.h"
#include "casegen/jax_case_spec.h"
#include "casegen/jax_mutation.h"
#include "casegen/jax_production.h"
#include "harness/target_inputs.h"

namespace rpa::fuzz {

// fuzz_validate: 0-2 named mutations on a case of up to 8 sequences of up to 64 tokens,
// head_dim up to 128, pages of up to 16 tokens. Validation reads only shapes, dtypes, the
// index arrays and the parameters, and every rule and value class is reachable at these
// sizes (the VMEM rules through the limit, SMEM through its mutation, jax mode's Pallas
// program rules at head_dim 128, the one size up to here the Pallas kernel traces); larger
// shapes would only spend the time on allocating q and kv_pages.
props::BuildOptions validate_options();

// fuzz_differential: strict-valid cases of up to 4 sequences of up to 32 tokens, head_dim up
// to 8, pages of up to 8 tokens, at most 16 query heads. The dense reference runs in double
// precision, O(q rows * kv_len * Hq * D), and so does the kernel's schedule, one per input
// (the bytes pick which): at these bounds the target runs ~1,000 kernel-vs-reference checks
// a second on one core under ASan + UBSan; head_dim 16 halves that, and kv_len 40 with both
// schedules per input gave under 200. Block sizes still reach pages_per_seq + 2, query blocks
// span sequences, and the properties cover the large shapes.
props::BuildOptions differential_options();

struct DifferentialInput {
  int64_t threads = 1;  // 1 or 2 worker threads for the kernel
  int64_t literal = 0;  // 1: the literal schedule, the Pallas program (KernelOptions)
  props::CaseSpec spec;
};

template <class Io>
void visit_differential(Io& io, DifferentialInput& d) {
  io.num(d.threads, 1, 2, {});
  io.num(d.literal, 0, 1, {});
  props::visit_case(io, d.spec, differential_options());
}

DifferentialInput decode_differential(std::span<const uint8_t> bytes);
std::vector<uint8_t> encode_differential(const DifferentialInput& d);

// A jax production call (after visit_production_head): its recipe and 0-2 named mutations,
// as visit_case draws them, under validate_options()'s counts.
struct JaxProductionInput {
  props::ProductionSpec spec;
  std::vector<props::MutationSpec> mutations;
};

template <class Io>
void visit_jax_production(Io& io, JaxProductionInput& v) {
  const bool allow_shape = visit_production_head(io, v.spec);
  props::CaseSpec c = props::production_case(v.spec);
  c.mutations = v.mutations;
  props::BuildOptions o = validate_options();
  if (!allow_shape) {
    for (props::MutationKind k : props::all_mutation_kinds()) {
      if (props::mutation_group(k) != props::MutationGroup::kShape) o.mutation_kinds.push_back(k);
    }
  }
  props::visit_mutations(io, c, o);
  v.mutations = c.mutations;
}

JaxProductionInput decode_jax_production(std::span<const uint8_t> payload);
std::vector<uint8_t> encode_jax_production(const JaxProductionInput& v);  // with the tag

}  // namespace rpa::fuzz
