// A named workload in tpu-inference v3's dialect, built from its jax twin
// (harness/jax_workload.h): what `rpa bench --preset v3` times (cli/v3_bench.cc).
#pragma once

#include <string>

#include "core/v3_inputs.h"
#include "core/v3_params.h"
#include "harness/jax_workload.h"
#include "harness/workloads.h"

namespace rpa::bench {

// The same call in tpu-inference v3's dialect (DESIGN.md section 16), so that the two
// dialects are timed on the same shapes and data: queries = q; kv_cache = kv_pages in v3's
// packed layout, page for page (NaN where kv_pages has NaN); keys / values = each sequence's
// last q_len tokens, which the fused update writes back where they already are;
// page_indices flattened; distribution [0, 0, N] (every sequence in the mixed pass, as the
// package's own tests run it); sm_scale as the jax workload's. The output equals the jax
// dialect's. Checked with v3 strict validation (std::logic_error naming the rule).
struct V3Workload {
  WorkloadSpec spec;
  V3Inputs inputs;
  V3Params params;
  std::string label() const;  // "v3-decode/bfloat16"
};
V3Workload build_v3_workload(const Workload& w);

}  // namespace rpa::bench
