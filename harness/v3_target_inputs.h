// How fuzz_validate, fuzz_differential and fuzz_raw_inputs read a v3 input's bytes (after
// kV3Tag, harness/target_inputs.h): the build options (their size caps), the thread count, the
// named v3 mutations; and a v3 production call's mutations. Shared with the seed writer
// (write_seeds.cc), so each seed decodes to the case it was written from.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "casegen/v3_build_case.h"
#include "casegen/v3_case_spec.h"
#include "casegen/v3_mutation.h"
#include "casegen/v3_production.h"
#include "harness/target_inputs.h"

namespace rpa::fuzz {

// fuzz_differential's v3 part: up to 4 sequences of up to 32 tokens (prefill chunks and mixed
// rows up to 8), head_dim up to 8 (hd64: 64), as differential_options() and for its reason.
props::V3BuildOptions v3_differential_options();

struct V3DifferentialInput {
  int64_t threads = 1;  // 1 or 2; the other count is checked bit for bit against it
  props::V3CaseSpec spec;
};

template <class Io>
void visit_v3_differential(Io& io, V3DifferentialInput& d) {
  io.num(d.threads, 1, 2, {});
  props::visit_v3_case(io, d.spec, v3_differential_options());
}

V3DifferentialInput decode_v3_differential(std::span<const uint8_t> payload);

// fuzz_validate's v3 part: a case of up to 8 sequences of up to 64 tokens, head_dim up to
// 128 (validation reads shapes, index arrays and keywords; larger arrays only cost time),
// then 0-2 named mutations (casegen/v3_mutation.h) that compose: the first any that
// applies, the second a non-shape one of another group; each with an argument 0..15 (its
// variant and where it applies).
props::V3BuildOptions v3_validate_options();
using props::kMaxV3MutationArg;

struct V3ValidateInput {
  props::V3CaseSpec spec;
  std::vector<props::V3Mutation> mutations;
};

// The mutations that may come at position `index` after `before` (v3_mutations_compose's
// rule), in all_v3_mutation_kinds() order.
std::vector<props::V3MutationKind> v3_mutation_choices(
    const props::V3CaseSpec& spec, const std::vector<props::V3Mutation>& before);

// 0-2 named v3 mutations of spec, as v3_mutation_choices allows them; each with an argument
// 0..kMaxV3MutationArg. visit_v3_validate's last choices, and the production part's.
template <class Io>
void visit_v3_mutations(Io& io, const props::V3CaseSpec& spec, std::vector<props::V3Mutation>& mutations,
                        bool allow_shape = true) {
  int64_t count = static_cast<int64_t>(mutations.size());
  io.num(count, 0, 2, {});
  std::vector<props::V3Mutation> chosen;
  for (int64_t i = 0; i < count; ++i) {
    std::vector<props::V3MutationKind> choices = v3_mutation_choices(spec, chosen);
    if (!allow_shape) std::erase_if(choices, [](props::V3MutationKind k) {
      return props::v3_mutation_group(k) == props::V3MutationGroup::kShape;
    });
    if (choices.empty()) break;
    props::V3Mutation m = i < static_cast<int64_t>(mutations.size())
                              ? mutations[static_cast<size_t>(i)]
                              : props::V3Mutation{choices.front(), 0};
    int64_t k = 0;
    for (size_t c = 0; c < choices.size(); ++c) {
      if (choices[c] == m.kind) k = static_cast<int64_t>(c);
    }
    io.num(k, 0, static_cast<int64_t>(choices.size()) - 1, {});
    io.num(m.arg, 0, kMaxV3MutationArg, {0});
    chosen.push_back({choices[static_cast<size_t>(k)], m.arg});
  }
  mutations = chosen;
}

template <class Io>
void visit_v3_validate(Io& io, V3ValidateInput& v) {
  props::visit_v3_case(io, v.spec, v3_validate_options());
  visit_v3_mutations(io, v.spec, v.mutations);
}

V3ValidateInput decode_v3_validate(std::span<const uint8_t> payload);

// A v3 production call (after visit_production_head): its recipe and 0-2 named v3 mutations,
// as visit_v3_validate draws them.
struct V3ProductionInput {
  props::ProductionSpec spec;
  std::vector<props::V3Mutation> mutations;
};

template <class Io>
void visit_v3_production(Io& io, V3ProductionInput& v) {
  const bool allow_shape = visit_production_head(io, v.spec);
  visit_v3_mutations(io, props::production_v3_case(v.spec), v.mutations, allow_shape);
}

V3ProductionInput decode_v3_production(std::span<const uint8_t> payload);
std::vector<uint8_t> encode_v3_production(const V3ProductionInput& v);     // with the tag
std::vector<uint8_t> encode_v3_validate(const V3ValidateInput& v);          // with the tag
std::vector<uint8_t> encode_v3_differential(const V3DifferentialInput& d);  // with the tag

}  // namespace rpa::fuzz
