#include "service/path_features.h"

#include <exception>
#include <string>

#include "schedule/jax_program.h"
#include "schedule/v3_program.h"
#include "validation/jax_kernel_plan.h"
#include "validation/jax_validate.h"
#include "validation/v3_validate.h"

namespace rpa {

PathFeatures case_path_features(const Case& c, const TargetProfile& target) {
  PathFeatures f;
  if (c.dialect == Dialect::kJax) {
    if (const std::optional<Failure> bad = validate(c.inputs, c.params, {.mode = Mode::kJax, .target = target})) {
      f.hit("rejected." + std::string(rule_info(bad->rule).name));
      return f;
    }
    // The walk's precondition (schedule/jax_program.h): JAX's validators let index arrays of
    // other dtypes and a num_seqs past the slots through (the kernel prefetches them as given;
    // the campaign's num_seqs_dtype mutation made the walk read past cu_q_lens).
    const Inputs& in = c.inputs;
    const bool walkable =
        in.kv_lens.dtype() == DType::kInt32 && in.page_indices.dtype() == DType::kInt32 &&
        in.cu_q_lens.dtype() == DType::kInt32 && in.num_seqs.dtype() == DType::kInt32 &&
        in.kv_lens.rank() == 1 && in.page_indices.rank() == 2 && in.cu_q_lens.rank() == 1 &&
        in.num_seqs.numel() >= 1 && in.kv_pages.rank() == 4 && in.q.rank() == 3 &&
        in.kv_lens.dim(0) >= 1 && in.cu_q_lens.dim(0) == in.kv_lens.dim(0) + 1 &&
        in.page_indices.dim(0) == in.kv_lens.dim(0) && in.page_indices.dim(1) >= 1 &&
        in.kv_pages.dim(1) >= 1 && in.num_seqs.int_at(0) >= 0 &&
        in.num_seqs.int_at(0) <= in.kv_lens.dim(0);
    if (!walkable) {
      f.hit("stops.not_walked");
      return f;
    }
    try {
      const KernelPlan plan = plan_kernel(in, c.params, target, /*untuned_blocks=*/true);
      if (plan.blocks.kv_pages_per_block < 1 || plan.blocks.queries_per_block < 1) {
        f.hit("stops.not_walked");
        return f;
      }
      return jax_path_features(in, c.params,
                               {.num_heads_blks = plan.num_heads_blks,
                                .num_q_blks = plan.num_q_blks,
                                .kv_pages_per_block = plan.blocks.kv_pages_per_block,
                                .queries_per_block = plan.blocks.queries_per_block});
    } catch (const std::exception&) {  // no heads plan for these dtypes and heads
      f.hit("stops.not_walked");
      return f;
    }
  }
  if (const std::optional<V3Failure> bad = v3_validate(c.dialect, c.v3_inputs, c.v3_params, Mode::kJax)) {
    f.hit("rejected." + std::string(v3_rule_info(bad->rule).name));
    return f;
  }
  return v3_path_features(c.dialect, c.v3_inputs, c.v3_params, tpu_generation(target));
}

}  // namespace rpa
