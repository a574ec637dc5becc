#include "validation/jax_kernel_plan.h"

#include <stdexcept>

#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"

namespace rpa {

KernelPlan plan_kernel(const Inputs& in, const Params& p, const TargetProfile& target,
                       bool untuned_blocks) {
  const PagedKvView view = kv_view(in);
  KernelPlan plan{};
  const auto heads = min_heads_per_block(view.num_q_heads(), 2 * view.num_kv_heads(),
                                         in.q.dtype(), in.kv_pages.dtype());
  if (!heads) throw std::invalid_argument("plan_kernel: heads not tileable (validate first)");
  plan.heads = *heads;
  const VmemShape shape{.page_size = view.page_size(),
                        .head_dim = view.head_dim(),
                        .q_heads_per_kv = view.q_heads_per_kv(),
                        .heads = plan.heads,
                        .q_dtype = in.q.dtype(),
                        .kv_dtype = in.kv_pages.dtype()};
  const int64_t limit = p.vmem_limit_bytes.value_or(default_scoped_vmem_limit(target));
  if (p.num_kv_pages_per_block && p.num_queries_per_block) {
    plan.blocks = {*p.num_kv_pages_per_block, *p.num_queries_per_block};
  } else if (untuned_blocks) {
    plan.blocks = untuned_block_sizes(view.pages_per_seq(), in.q.dim(0));
  } else {
    const auto blocks = default_block_sizes(shape, view.pages_per_seq(), in.q.dim(0), limit);
    if (!blocks) throw std::invalid_argument("plan_kernel: no block sizes fit (validate first)");
    plan.blocks = *blocks;
  }
  plan.num_heads_blks = view.num_q_heads() / plan.heads.q_heads;
  plan.num_q_blks = (in.q.dim(0) + plan.blocks.queries_per_block - 1) / plan.blocks.queries_per_block;
  plan.vmem_bytes = vmem_need_bytes(shape, plan.blocks);
  return plan;
}

}  // namespace rpa
