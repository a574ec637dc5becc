// How fuzz_validate and fuzz_differential read their bytes: the build options (their size
// caps) and, for fuzz_differential, the kernel options drawn before the case. Shared with
// the seed writer (write_seeds.cc), so each seed decodes to the case it was written from.
// Both go through the properties' one decoder, ByteSource + visit_case.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/dialect.h"
#include "casegen/jax_build_case.h"
#include "casegen/jax_case_spec.h"
#include "casegen/production.h"
#include "casegen/v3_build_case.h"
#include "casegen/v3_case_spec.h"
#include "casegen/v3_mutation.h"

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

// The leading choice of fuzz_differential, fuzz_raw_inputs and fuzz_validate: an input that
// starts with these two bytes is a tpu-inference v3 input (the rest decodes as that target's
// v3 part); any other input is the jax dialect's, decoded whole exactly as before the v3
// dialects came, so every corpus input written before keeps its meaning (none starts with
// them; `rpa_fuzz_seeds check` checks that the jax seeds never will).
inline constexpr uint8_t kV3Tag[2] = {'V', '3'};
// The bytes after the tag, or nullopt for a jax input.
std::optional<std::span<const uint8_t>> v3_payload(std::span<const uint8_t> bytes);
std::vector<uint8_t> with_v3_tag(std::span<const uint8_t> payload);

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

// fuzz_validate's production part (issue 33; casegen/production.h): an input that starts
// with these two bytes is a production call, the calls vLLM's TPU runner builds (128-512
// slots, token budgets to 8192, real models' heads, max_model_len to 128K, the programs'
// integer edges), of any dialect, with 0-2 named mutations (jax: as visit_case draws them,
// under validate_options()'s counts; v3: as visit_v3_validate). A shape mutation
// reallocates arrays, up to 32 times larger (rows_not_computed: 16 float32 combined heads
// for 2 float8 ones), so calls over kProductionShapeMutationBytes draw parameter mutations
// only: the target's 512 MB allocation limit holds. Validation reads shapes,
// index arrays and keywords alone, so the target materializes the call with zeros
// (Contents::kZeros, Tensor::shared_zeros): a call of up to 256 MiB allocates only its index
// arrays, and the target checks the bound itself (held_bytes against memory_bytes()). The jax
// and v3 inputs never start with it (`rpa_fuzz_seeds check`).
inline constexpr uint8_t kProductionTag[2] = {'P', 'R'};
inline constexpr int64_t kProductionShapeMutationBytes = int64_t{16} << 20;
std::optional<std::span<const uint8_t>> production_payload(std::span<const uint8_t> bytes);

struct ProductionValidateInput {
  props::ProductionSpec spec;
  std::vector<props::MutationSpec> mutations;      // a jax call's
  std::vector<props::V3Mutation> v3_mutations;     // a v3 call's
};

// The dialect (jax, tpu_inference_v3, tpu_inference_v3_hd64), its recipe, its mutations.
template <class Io>
void visit_production_validate(Io& io, ProductionValidateInput& v) {
  int64_t d = 0;
  for (int64_t k = 0; k < 3; ++k) d = kDialects[k] == v.spec.dialect ? k : d;
  io.num(d, 0, 2, {});
  props::visit_production(io, v.spec, kDialects[d]);
  const bool allow_shape = v.spec.memory_bytes() <= kProductionShapeMutationBytes;
  if (v.spec.dialect == Dialect::kJax) {
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
    v.v3_mutations.clear();
  } else {
    visit_v3_mutations(io, props::production_v3_case(v.spec), v.v3_mutations, allow_shape);
    v.mutations.clear();
  }
}

ProductionValidateInput decode_production_validate(std::span<const uint8_t> payload);
std::vector<uint8_t> encode_production_validate(const ProductionValidateInput& v);  // with the tag
std::vector<uint8_t> encode_v3_validate(const V3ValidateInput& v);          // with the tag
std::vector<uint8_t> encode_v3_differential(const V3DifferentialInput& d);  // with the tag

// "production call HEX\nDESCRIPTION\n": how fuzz_validate names a production call it fails on.
std::string production_replay(const ProductionValidateInput& v);

// fuzz_validate's bound on a production call: the bytes the materialized call holds are
// memory_bytes() within its slack, and that is within kProductionMemoryBytes; aborts with
// `replay` otherwise.
template <class In>
void check_held_bytes(const props::ProductionSpec& s, const In& in, const std::string& replay) {
  const int64_t held = props::held_bytes(in), formula = s.memory_bytes();
  if (std::abs(held - formula) > props::memory_bytes_slack(s) ||
      formula > props::kProductionMemoryBytes) {
    std::fprintf(stderr,
                 "fuzz_validate (production): the call holds %lld bytes, memory_bytes() says "
                 "%lld, the bound is %lld\n%s",
                 static_cast<long long>(held), static_cast<long long>(formula),
                 static_cast<long long>(props::kProductionMemoryBytes), replay.c_str());
    std::abort();
  }
}

}  // namespace rpa::fuzz
