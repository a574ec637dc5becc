#include "service/jax_dialect_ops.h"

#include <exception>
#include <optional>
#include <utility>

#include "schedule/jax_program.h"
#include "service/jax_check_case.h"
#include "service/jax_run_case.h"
#include "validation/jax_kernel_plan.h"
#include "validation/jax_validate.h"

namespace rpa {
namespace {

std::vector<DialectRule> jax_rules() {
  std::vector<DialectRule> out;
  for (const RuleInfo& r : rule_table()) {
    out.push_back({.name = r.name, .in_native = r.in_jax, .in_strict = r.in_strict,
                   .crash = r.jax_crash, .reason = r.reason});
  }
  return out;
}

std::vector<RuleReport> jax_failures(const Case& c, const ValidateOptions& o, bool all) {
  std::vector<Failure> fs;
  if (all) {
    fs = validate_all(c.inputs, c.params, o);
  } else if (std::optional<Failure> f = validate(c.inputs, c.params, o)) {
    fs.push_back(std::move(*f));
  }
  std::vector<RuleReport> out;
  for (const Failure& f : fs) out.push_back(rule_report(f, o.mode));
  return out;
}

// The Pallas walk on the plan the literal schedule runs (the call's block sizes, else the
// kernel's untuned defaults). A call the walk cannot take (index arrays that are not int32 or
// not [N], [N, pps], [N+1], num_seqs outside [0, N]: JAX's validators let some through) has
// "stops.not_walked".
PathFeatures jax_walk_features(const Case& c, const TargetProfile& target) {
  PathFeatures f;
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

}  // namespace

const DialectOps kJaxDialectOps{
    .dialect = Dialect::kJax,
    .native_mode = "jax",
    .reports_dialect = false,
    .rules = jax_rules,
    .failures = jax_failures,
    .walk_features = jax_walk_features,
    .check = jax_check,
};

}  // namespace rpa
