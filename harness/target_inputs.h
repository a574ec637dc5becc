// How the byte-decoding fuzz targets (fuzz_validate, fuzz_differential, fuzz_raw_inputs) tell
// their inputs' parts apart: the tags that open a v3 input and a production call, and the
// production call's head, every dialect's (its dialect and recipe). Each dialect family's
// formats: harness/jax_target_inputs.h (the untagged inputs, and a jax production call's
// mutations), harness/v3_target_inputs.h (the v3 inputs, and a v3 production call's).
// Shared with the seed writer (write_seeds.cc), so each seed decodes to the case it was written
// from.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/dialect.h"
#include "casegen/production.h"

namespace rpa::fuzz {

// The leading choice of fuzz_differential, fuzz_raw_inputs and fuzz_validate: an input that
// starts with these two bytes is a tpu-inference v3 input (the rest decodes as that target's
// v3 part); any other input is the jax dialect's, decoded whole exactly as before the v3
// dialects came, so every corpus input written before keeps its meaning (none starts with
// them; `rpa_fuzz_seeds check` checks that the jax seeds never will).
inline constexpr uint8_t kV3Tag[2] = {'V', '3'};
// The bytes after the tag, or nullopt for a jax input.
std::optional<std::span<const uint8_t>> v3_payload(std::span<const uint8_t> bytes);
std::vector<uint8_t> with_v3_tag(std::span<const uint8_t> payload);

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

// The head of a production input, every family's: the dialect (jax, tpu_inference_v3,
// tpu_inference_v3_hd64), then its recipe; then the family's mutations
// (visit_jax_production, visit_v3_production), shape mutations only where this returns true.
template <class Io>
bool visit_production_head(Io& io, props::ProductionSpec& spec) {
  int64_t d = 0;
  for (int64_t k = 0; k < 3; ++k) d = kDialects[k] == spec.dialect ? k : d;
  io.num(d, 0, 2, {});
  props::visit_production(io, spec, kDialects[d]);
  return spec.memory_bytes() <= kProductionShapeMutationBytes;
}

// The dialect a production payload (the bytes after the tag) names: its first choice, which
// picks the family that decodes the rest (harness/input_families.h: family_of).
Dialect production_dialect(std::span<const uint8_t> payload);

// "production call HEX\nDESCRIPTION\n": how fuzz_validate names a production call it fails on.
std::string production_replay(const props::ProductionSpec& spec);

// fuzz_validate's bound on a production call: the bytes the materialized call holds (`held`,
// the family's held_bytes) are memory_bytes() within its slack, and that is within
// kProductionMemoryBytes; aborts with `replay` otherwise.
void check_held_bytes(const props::ProductionSpec& s, int64_t held, const std::string& replay);

}  // namespace rpa::fuzz
