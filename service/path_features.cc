#include "service/path_features.h"

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
    const KernelPlan plan = plan_kernel(c.inputs, c.params, target, /*untuned_blocks=*/true);
    return jax_path_features(c.inputs, c.params,
                             {.num_heads_blks = plan.num_heads_blks,
                              .num_q_blks = plan.num_q_blks,
                              .kv_pages_per_block = plan.blocks.kv_pages_per_block,
                              .queries_per_block = plan.blocks.queries_per_block});
  }
  if (const std::optional<V3Failure> bad = v3_validate(c.dialect, c.v3_inputs, c.v3_params, Mode::kJax)) {
    f.hit("rejected." + std::string(v3_rule_info(bad->rule).name));
    return f;
  }
  return v3_path_features(c.dialect, c.v3_inputs, c.v3_params, tpu_generation(target));
}

}  // namespace rpa
