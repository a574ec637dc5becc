// The generators as callers outside RapidCheck name them: `rpa gen --seed` and rpa.gen()
// (a profile, a size, a seed), and the Hypothesis strategies of the Python package (bytes
// through ByteSource, the fuzzers' decoder). One place turns those names into BuildOptions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "casegen/jax_build_case.h"
#include "casegen/jax_case_spec.h"
#include "casegen/jax_mutation.h"
#include "casegen/production.h"
#include "casegen/v3_build_case.h"
#include "casegen/v3_case_spec.h"
#include "casegen/v3_mutation.h"

namespace rpa::props {

// What to draw. profile: "" (any batch mix), "decode", "prefill", "mixed", "long" (the
// long-context generator), "long32k" (v3 only: the long tier) or "edge" (one or two named
// mutations); "production" is drawn by
// seeded_production_spec, not through these options; head_dim fixes the head
// dimension (the Pallas kernel on the CPU traces multiples of 128 only).
struct GenRequest {
  std::string profile;
  std::optional<int64_t> head_dim;
};

struct GenOptions {
  std::optional<BuildOptions> options;  // set on success
  std::string error;                    // one line, set on failure
};

// The options a request names; an error such as "profile takes decode, prefill, mixed,
// long or edge (got 'huge')" or "head_dim takes 1 to 128 with profile long (got 256)".
GenOptions gen_options(const GenRequest& request);

// rpa gen --seed: the seeded stream (RandomSource) at `size` (0 to kFullSize) through
// build_case.
CaseSpec seeded_spec(uint64_t seed, int size, const BuildOptions& options);

// Bounds a caller may narrow the strategies' cases to (0: the generator's own bound).
struct DecodeBounds {
  int64_t max_seqs = 0;
  int64_t max_kv_len = 0;
  int64_t max_head_dim = 0;
  int64_t max_page_size = 0;
  // v3: windows and page tables at the integer edges (V3BuildOptions::integer_edges).
  bool integer_edges = false;
  // jax: q and KV may be one value everywhere (BuildOptions::flat_data; the campaign: false).
  bool flat_data = true;
};

// The Hypothesis strategies' options: the request's, narrowed by the bounds, with no
// mutation (valid) or exactly one, of one of `kinds` when that is not empty.
GenOptions strategy_options(const GenRequest& request, const DecodeBounds& bounds, bool valid,
                            std::span<const MutationKind> kinds);

// The v3 dialects' options for a request (d a v3 dialect): the same profile names, "edge"
// meaning small batches at their boundaries (v3 cases are always valid); head_dim 1 to 256
// (long: 128), and for hd64 64 alone.
struct V3GenOptions {
  std::optional<V3BuildOptions> options;  // set on success
  std::string error;                      // one line, set on failure
};
V3GenOptions v3_gen_options(Dialect d, const GenRequest& request);

// The v3 Hypothesis strategies' options: v3_gen_options narrowed by the bounds (a v3 case
// has no page size bound of its own: max_page_size is ignored).
V3GenOptions v3_strategy_options(Dialect d, const GenRequest& request, const DecodeBounds& bounds);

// What a v3 strategy draws from its bytes (read most significant first): the case, as
// visit_v3_case draws it, and for an invalid case one named mutation of `kinds` (all, when
// empty) among those that apply to it, with its argument 0..kMaxV3MutationArg (0 first, so
// shrinking lowers the variant). `mutations` is empty when a mutation was asked for and none
// applies.
struct V3Drawn {
  V3CaseSpec spec;
  std::vector<V3Mutation> mutations;
};
V3Drawn decode_v3_strategy(std::span<const uint8_t> bytes, const V3BuildOptions& options,
                           bool valid, std::span<const V3MutationKind> kinds);

// rpa gen --seed for a v3 dialect: RandomSource at `size` through build_v3_case.
V3CaseSpec seeded_v3_spec(uint64_t seed, int size, const V3BuildOptions& options);

// The v3 dialects' long tier (v3_long_tier_options): kv_len 32768 to 65536 in a call or two;
// no size scales it. Bounds narrow it only from 32768 up.
inline constexpr std::string_view kLongTierProfile = "long32k";

// The production profile, of every dialect (casegen/production.h): a recipe from the
// seed, sized by its own bounds (no size, no head_dim: the model fixes it).
inline constexpr std::string_view kProductionProfile = "production";
ProductionSpec seeded_production_spec(uint64_t seed, Dialect d);

}  // namespace rpa::props
