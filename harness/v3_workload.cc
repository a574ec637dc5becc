// A named workload in tpu-inference v3's dialect (harness/v3_workload.h): its jax twin's
// pages copied into v3's packed cache, strictly validated.
#include "harness/v3_workload.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <vector>

#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"
#include "core/v3_cache_layout.h"
#include "validation/v3_validate.h"

namespace rpa::bench {

std::string V3Workload::label() const {
  return "v3-" + spec.name + "/" + std::string(dtype_name(spec.dtype));
}

V3Workload build_v3_workload(const Workload& w) {
  const Inputs& in = w.inputs;
  const PagedKvView view = kv_view(in);
  const int64_t T = in.q.dim(0), S = view.page_size(),
                Hkv = view.num_kv_heads(), D = view.head_dim(), P = in.kv_pages.dim(0);
  const Dialect dialect = Dialect::kTpuInferenceV3;
  const DType kv = in.kv_pages.dtype();
  const V3CacheLayout layout(dialect, kv, Hkv, D);
  const int64_t e = dtype_size(kv);
  V3Workload v;
  v.spec = w.spec;
  V3Inputs& o = v.inputs;
  o.queries = in.q;
  o.keys = Tensor(kv, {T, Hkv, D});
  o.values = Tensor(kv, {T, Hkv, D});
  o.kv_cache = Tensor(kv, layout.cache_shape(P, S));
  for (int64_t i = 0; i < o.kv_cache.numel(); ++i) put(kv, o.kv_cache.data(), i, NAN);
  for (int64_t page = 0; page < P; ++page) {
    for (int64_t slot = 0; slot < S; ++slot) {
      const std::byte* src = in.kv_pages.data() + (page * S + slot) * 2 * Hkv * D * e;
      std::byte* dst = o.kv_cache.data() + layout.token_offset(page, slot, S) * e;
      for (int64_t h = 0; h < Hkv; ++h) {
        std::memcpy(dst + layout.k_offset(h) * e, src + 2 * h * D * e, static_cast<size_t>(D * e));
        std::memcpy(dst + layout.v_offset(h) * e, src + (2 * h + 1) * D * e, static_cast<size_t>(D * e));
      }
    }
  }
  for (int64_t s = 0; s < view.num_seqs(); ++s) {
    for (int64_t j = 0; j < view.q_len(s); ++j) {
      const int64_t t = view.kv_len(s) - view.q_len(s) + j, row = view.q_start(s) + j;
      for (int64_t h = 0; h < Hkv; ++h) {
        std::memcpy(o.keys.data() + (row * Hkv + h) * D * e, in.kv_pages.data() + view.k_offset(s, t, h) * e,
                    static_cast<size_t>(D * e));
        std::memcpy(o.values.data() + (row * Hkv + h) * D * e, in.kv_pages.data() + view.v_offset(s, t, h) * e,
                    static_cast<size_t>(D * e));
      }
    }
  }
  o.kv_lens = in.kv_lens;
  o.page_indices = Tensor(DType::kInt32, {in.page_indices.numel()}, std::vector<std::byte>(
      in.page_indices.bytes().begin(), in.page_indices.bytes().end()));
  o.cu_q_lens = in.cu_q_lens;
  const auto k = static_cast<int32_t>(view.num_seqs());
  o.distribution = Tensor::from_int32({3}, std::vector<int32_t>{0, 0, k});
  v.params.sm_scale = w.params.sm_scale;
  if (const std::optional<V3Failure> f = v3_validate(dialect, o, v.params, Mode::kStrict)) {
    throw std::logic_error("bench workload " + v.label() + " rejected by v3 strict validation: " +
                           std::string(v3_rule_info(f->rule).name) + ": " + f->message);
  }
  return v;
}

}  // namespace rpa::bench
