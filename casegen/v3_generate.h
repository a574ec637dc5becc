// The v3 dialects' generators as callers outside RapidCheck name them (casegen/generate.h):
// a request's V3BuildOptions for `rpa gen --seed` and rpa.gen(), the seeded stream, and the
// Hypothesis strategies' options and decoder.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/dialect.h"
#include "casegen/generate.h"
#include "casegen/v3_build_case.h"
#include "casegen/v3_case_spec.h"
#include "casegen/v3_mutation.h"

namespace rpa::props {

static_assert(kV3MaxHeadDim == kGenMaxHeadDim);

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

}  // namespace rpa::props
