// From a V3CaseSpec to the arrays and keywords of one tpu-inference v3 call (DESIGN.md
// section 16): the packed cache exactly as the kernel holds it, with each sequence's cached
// prefix written in place and the new tokens' slots left as garbage for the fused update to
// overwrite (or, without update_kv_cache, the whole sequence pre-filled).
#pragma once

#include "core/v3_inputs.h"
#include "core/v3_params.h"
#include "casegen/jax_materialize.h"
#include "casegen/v3_case_spec.h"

namespace rpa::props {

struct V3Materialized {
  V3Inputs inputs;
  V3Params params;
};

// Deterministic: the same spec gives the same bytes. Data is N(0, 1)-ish (a sum of four
// uniforms), rounded to the arrays' dtypes; what no sequence reads (q/K/V rows past
// cu_q_lens[k], cache slots past kv_len and spare pages, page_indices / kv_lens /
// cu_q_lens entries of unused slots) is NaN and garbage integers, or zeros without
// spec.garbage.
// Contents::kZeros (jax_materialize.h): q, keys, values and the cache are Tensor::shared_zeros,
// which allocate nothing, for a caller that only validates (fuzz_validate, whose production
// calls hold up to 256 MiB of arrays); the index arrays are the same as with data, and the
// sink (which hd64's validation reads) is drawn as with data.
V3Materialized materialize_v3(const V3CaseSpec& spec, Contents contents = Contents::kData);

}  // namespace rpa::props
