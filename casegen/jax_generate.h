// The jax dialect's generators as callers outside RapidCheck name them (casegen/generate.h):
// a request's BuildOptions for `rpa gen --seed` and rpa.gen(), the seeded stream, and the
// Hypothesis strategies' options.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "casegen/generate.h"
#include "casegen/jax_build_case.h"
#include "casegen/jax_case_spec.h"
#include "casegen/jax_mutation.h"

namespace rpa::props {

static_assert(kMaxHeadDim == kGenMaxHeadDim);

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

// The Hypothesis strategies' options: the request's, narrowed by the bounds, with no
// mutation (valid) or exactly one, of one of `kinds` when that is not empty.
GenOptions strategy_options(const GenRequest& request, const DecodeBounds& bounds, bool valid,
                            std::span<const MutationKind> kinds);

}  // namespace rpa::props
