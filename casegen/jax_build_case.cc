#include "casegen/jax_build_case.h"

namespace rpa::props {

int64_t least_vmem_limit(const CaseSpec& spec) {
  const int64_t hc = 2 * spec.num_kv_heads;
  const VmemShape shape{
      .page_size = spec.page_size,
      .head_dim = spec.head_dim,
      .q_heads_per_kv = spec.q_per_kv,
      .heads = *min_heads_per_block(spec.num_q_heads(), hc, spec.q_dtype, spec.kv_dtype),
      .q_dtype = spec.q_dtype,
      .kv_dtype = spec.kv_dtype};
  const Params& p = spec.params;
  const BlockSizes blocks = p.num_kv_pages_per_block && p.num_queries_per_block
                                ? BlockSizes{*p.num_kv_pages_per_block, *p.num_queries_per_block}
                                : BlockSizes{1, 1};
  return vmem_need_bytes(shape, blocks);
}

}  // namespace rpa::props
