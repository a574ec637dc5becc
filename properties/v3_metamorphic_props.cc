// Metamorphic properties of the tiled kernel on tpu-inference v3 calls (DESIGN.md sections 9
// and 16): changes the definition says cannot matter leave the answer unchanged. Bit-identical
// where the kernel does the same arithmetic operation for operation (pages permuted, the
// fused update vs a cache updated beforehand, a sink of -inf vs none, the packed layout vs
// the jax dialect's at the same KV block); within the tolerance (kRpaTolerance) where the
// schedule's float32 order may change (block sizes, threads, sequence order). The fused
// update writes only the new tokens' slots.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/jax_inputs.h"
#include "core/jax_params.h"
#include "core/v3_cache_layout.h"
#include "kernel/jax_kernel.h"
#include "kernel/v3_kernel.h"
#include "oracle/v3_compare.h"
#include "casegen/jax_spec_model.h"
#include "properties/v3_kernel_check.h"
#include "casegen/v3_materialize.h"
#include "properties/v3_rc_case.h"
#include "reference/v3_reference.h"
#include "validation/jax_heads_per_block.h"
#include "validation/jax_validate.h"

namespace rpa::props {
namespace {

void copy_elems(const Tensor& from, int64_t from_elem, Tensor& to, int64_t to_elem, int64_t n) {
  if (n == 0) return;  // empty tensors may have no storage at all
  const int64_t size = dtype_size(from.dtype());
  std::memcpy(to.data() + to_elem * size, from.data() + from_elem * size,
              static_cast<size_t>(n * size));
}

int64_t per_page(const Tensor& cache) {
  return cache.dim(0) > 0 ? cache.numel() / cache.dim(0) : 0;
}

// Physical page q moves to perm[q] in the cache; page_indices entries naming a page follow it.
V3Inputs permute_pages(const V3Inputs& in, const std::vector<int64_t>& perm) {
  V3Inputs out = in;
  const int64_t pages = in.kv_cache.dim(0), n = per_page(in.kv_cache);
  for (int64_t q = 0; q < pages; ++q) {
    copy_elems(in.kv_cache, q * n, out.kv_cache, perm[static_cast<size_t>(q)] * n, n);
  }
  for (int64_t e = 0; e < in.page_indices.numel(); ++e) {
    const int64_t q = in.page_indices.int_at(e);
    if (q >= 0 && q < pages) out.page_indices.set_int(e, perm[static_cast<size_t>(q)]);
  }
  return out;
}

RC_GTEST_PROP(V3Metamorphic, PagePermutationIsBitIdentical, ()) {
  const V3CaseSpec spec = *gen_v3_case();
  const Dialect d = spec.dialect;
  const V3Materialized m = materialize_v3(spec);
  const std::vector<int64_t> perm = gen_permutation(m.inputs.kv_cache.dim(0), "page permutation");
  const V3Inputs moved = permute_pages(m.inputs, perm);
  assert_v3_strict_valid(d, moved, m.params);
  const V3KernelResult a = v3_tiled_attention(d, m.inputs, m.params, {.threads = 1});
  const V3KernelResult b = v3_tiled_attention(d, moved, m.params, {.threads = 1});
  RC_ASSERT(same_bits(a.out, b.out));
  // The updated caches are the same pages, moved.
  const int64_t n = per_page(a.kv_cache);
  Tensor back = a.kv_cache;
  for (int64_t q = 0; q < a.kv_cache.dim(0); ++q) {
    copy_elems(b.kv_cache, perm[static_cast<size_t>(q)] * n, back, q * n, n);
  }
  RC_ASSERT(same_bits(back, a.kv_cache));
}

// Sequences reordered within each range of distribution (a decode stays in the decode range,
// and so on), their query rows, new keys and values, kv_lens and page-table rows with them.
struct Reordered {
  V3Inputs inputs;
  std::vector<int64_t> order;  // new position -> old sequence
};

Reordered reorder_sequences(const V3Inputs& in, const V3CaseSpec& spec) {
  const int64_t k = in.distribution.int_at(2);
  const int64_t bounds[] = {0, in.distribution.int_at(0), in.distribution.int_at(1), k};
  Reordered r{in, std::vector<int64_t>(static_cast<size_t>(k))};
  std::iota(r.order.begin(), r.order.end(), 0);
  for (int range = 0; range < 3; ++range) {
    const std::vector<int64_t> perm =
        gen_permutation(bounds[range + 1] - bounds[range], "sequence order");
    for (size_t i = 0; i < perm.size(); ++i) {
      r.order[static_cast<size_t>(bounds[range]) + i] = bounds[range] + perm[i];
    }
  }
  const int64_t pps = spec.pages_per_seq(), hq = in.queries.dim(1) * in.queries.dim(2),
                hkv = in.keys.dim(1) * in.keys.dim(2);
  int64_t row = 0;
  for (int64_t s = 0; s < k; ++s) {
    const int64_t old = r.order[static_cast<size_t>(s)];
    const int64_t start = in.cu_q_lens.int_at(old), len = in.cu_q_lens.int_at(old + 1) - start;
    copy_elems(in.queries, start * hq, r.inputs.queries, row * hq, len * hq);
    copy_elems(in.keys, start * hkv, r.inputs.keys, row * hkv, len * hkv);
    copy_elems(in.values, start * hkv, r.inputs.values, row * hkv, len * hkv);
    r.inputs.kv_lens.set_int(s, in.kv_lens.int_at(old));
    copy_elems(in.page_indices, old * pps, r.inputs.page_indices, s * pps, pps);
    row += len;
    r.inputs.cu_q_lens.set_int(s + 1, row);
  }
  return r;
}

// The output rows of each sequence in the original order, from the reordered call's output.
Tensor rows_back(const Tensor& out, const V3Inputs& in, const Reordered& r) {
  Tensor back = out;
  const int64_t hq = out.dim(1) * out.dim(2);
  for (size_t s = 0; s < r.order.size(); ++s) {
    const int64_t old = r.order[s];
    const int64_t from = r.inputs.cu_q_lens.int_at(static_cast<int64_t>(s));
    const int64_t to = in.cu_q_lens.int_at(old), len = in.cu_q_lens.int_at(old + 1) - to;
    copy_elems(out, from * hq, back, to * hq, len * hq);
  }
  return back;
}

RC_GTEST_PROP(V3Metamorphic, SequenceOrderOnlyMovesRows, ()) {
  const V3CaseSpec spec = *gen_v3_case();
  const Dialect d = spec.dialect;
  const V3Materialized m = materialize_v3(spec);
  const Reordered r = reorder_sequences(m.inputs, spec);
  RC_CLASSIFY(!std::is_sorted(r.order.begin(), r.order.end()), "reordered");
  assert_v3_strict_valid(d, r.inputs, m.params);
  const V3KernelResult a = v3_tiled_attention(d, m.inputs, m.params, {.threads = 1});
  const V3KernelResult b = v3_tiled_attention(d, r.inputs, m.params, {.threads = 1});
  // The same pages get the same records.
  RC_ASSERT(same_bits(a.kv_cache, b.kv_cache));
  const Tensor back = rows_back(b.out, m.inputs, r);
  RC_CLASSIFY(same_bits(back, a.out), "bit-identical");
  const V3ReferenceResult ref = v3_reference(d, m.inputs, m.params, Semantics::kKernel);
  assert_v3_agrees(d, m.inputs, m.params, ref, back, b.kv_cache, "reordered sequences");
}

// Every element of b within `scale` times rpa's tolerance of a (both kernel outputs of one
// call, each within the tolerance of the reference).
void assert_within(const Dialect d, const V3Inputs& in, const V3Params& p,
                   const V3ReferenceResult& ref, const Tensor& a, const Tensor& b, double scale) {
  const std::vector<double> allowed = v3_tolerance(d, in, p, ref, kRpaTolerance);
  const int64_t defined =
      in.cu_q_lens.int_at(in.distribution.int_at(2)) * in.queries.dim(1) * in.queries.dim(2);
  double share = 0.0;
  for (int64_t e = 0; e < defined; ++e) {
    const double x = a.float_at(e), y = b.float_at(e);
    if (std::isnan(x) || std::isnan(y)) {
      RC_ASSERT(std::isnan(x) == std::isnan(y));
      continue;
    }
    const double diff = std::fabs(x - y), tol = scale * allowed[static_cast<size_t>(e)];
    if (diff > tol)
      RC_LOG() << "element " << e << ": " << x << " vs " << y << ", allowed " << tol << "\n";
    RC_ASSERT(diff <= tol);
    if (diff > 0.0) share = std::max(share, diff / tol);
  }
  v3_share_tally().add("kernel vs kernel, blocks and threads (of 2x)", share);
}

RC_GTEST_PROP(V3Metamorphic, BlockSizesAndThreadsKeepTheAnswer, ()) {
  const V3CaseSpec spec = *gen_v3_case();
  const Dialect d = spec.dialect;
  const V3Materialized m = materialize_v3(spec);
  V3Params p = m.params;
  const int64_t ps = spec.page_size;
  if (d == Dialect::kTpuInferenceV3Hd64) {
    p.num_kv_pages_per_block = *rc::gen::inRange<int64_t>(1, 17).as("num_kv_pages_per_block");
  } else if (!p.skip_kv_mask) {
    // skip_kv_mask ties kv_len to every pass's compute block: those stay.
    const int64_t pages = *rc::gen::inRange<int64_t>(1, 9).as("m_block_sizes kv pages");
    V3BlockSizes& b = *p.m_block_sizes;
    b = V3BlockSizes{b[0], pages * ps * (b[1] / b[3]), b[2], pages * ps};
  }
  const int t1 = *rc::gen::inRange(1, 4).as("threads a"),
            t2 = *rc::gen::inRange(1, 4).as("threads b");
  // Other KV blocks under a sliding window can meet kernel.py's schedule rules (findings 23,
  // 24: which blocks a window hides); the kernel then computes something else, not rpa's.
  if (const std::optional<V3Failure> f = v3_validate(d, m.inputs, p, Mode::kStrict);
      f && (f->rule == V3RuleId::masked_block_overflows ||
            f->rule == V3RuleId::window_skips_cache_write)) {
    RC_DISCARD("the new blocks meet a kernel schedule rule");
  }
  assert_v3_strict_valid(d, m.inputs, p);
  RC_CLASSIFY(v3_kv_pages_per_block(d, m.inputs, p) != v3_kv_pages_per_block(d, m.inputs, m.params),
              "KV block changed");
  const V3KernelResult a = v3_tiled_attention(d, m.inputs, m.params, {.threads = t1});
  const V3KernelResult b = v3_tiled_attention(d, m.inputs, p, {.threads = t2});
  RC_ASSERT(same_bits(a.kv_cache, b.kv_cache));
  RC_CLASSIFY(same_bits(a.out, b.out), "bit-identical");
  const V3ReferenceResult ref = v3_reference(d, m.inputs, m.params, Semantics::kKernel);
  assert_v3_agrees(d, m.inputs, p, ref, b.out, b.kv_cache, "other blocks and threads");
  assert_within(d, m.inputs, m.params, ref, a.out, b.out, 2.0);
}

// The fused update then attention equals attention over the cache updated beforehand
// (update_kv_cache=False), bit for bit: the update is a step of the definition, not part of
// the arithmetic.
RC_GTEST_PROP(V3Metamorphic, FusedUpdateEqualsUpdatedCache, ()) {
  V3BuildOptions o;
  o.dialect = Dialect::kTpuInferenceV3;  // hd64 always updates
  V3CaseSpec spec = *gen_v3_case(o);
  spec.params.update_kv_cache = true;
  const V3Materialized m = materialize_v3(spec);
  const Dialect d = spec.dialect;
  const V3KernelResult fused = v3_tiled_attention(d, m.inputs, m.params, {.threads = 1});
  V3Inputs before = m.inputs;
  before.kv_cache = fused.kv_cache;
  V3Params p = m.params;
  p.update_kv_cache = false;
  assert_v3_strict_valid(d, before, p);
  const V3KernelResult plain = v3_tiled_attention(d, before, p, {.threads = 1});
  RC_ASSERT(same_bits(plain.out, fused.out));
  RC_ASSERT(same_bits(plain.kv_cache, fused.kv_cache));
  // And the cache it wrote is the reference's update.
  const V3ReferenceResult ref = v3_reference(d, m.inputs, m.params, Semantics::kKernel);
  RC_ASSERT(same_bits(ref.kv_cache, fused.kv_cache));
}

// The fused update writes the records of positions kv_len - q_len .. kv_len - 1 of each
// sequence < distribution[2], located here from kv_lens, cu_q_lens and page_indices alone;
// every other bit of the cache is the input's (without update_kv_cache: every bit).
RC_GTEST_PROP(V3Metamorphic, OnlyNewTokenSlotsChange, ()) {
  const V3CaseSpec spec = *gen_v3_case();
  const Dialect d = spec.dialect;
  const V3Materialized m = materialize_v3(spec);
  const V3Inputs& in = m.inputs;
  const V3KernelResult got = v3_tiled_attention(d, in, m.params, {.threads = 1});
  const bool updates = d == Dialect::kTpuInferenceV3Hd64 || m.params.update_kv_cache;
  const V3CacheLayout layout(d, in.kv_cache.dtype(), in.keys.dim(1), in.queries.dim(2));
  std::vector<bool> written(static_cast<size_t>(in.kv_cache.numel()), false);
  const int64_t ps = spec.page_size, pps = spec.pages_per_seq(), stride = layout.token_stride();
  int64_t new_tokens = 0;
  for (int64_t s = 0; updates && s < in.distribution.int_at(2); ++s) {
    const int64_t kv = in.kv_lens.int_at(s),
                  q = in.cu_q_lens.int_at(s + 1) - in.cu_q_lens.int_at(s);
    for (int64_t pos = kv - q; pos < kv; ++pos) {
      const int64_t page = in.page_indices.int_at(s * pps + pos / ps);
      const int64_t at = layout.token_offset(page, pos % ps, ps);
      std::fill_n(written.begin() + at, stride, true);
      ++new_tokens;
    }
  }
  RC_CLASSIFY(new_tokens == 0, "nothing written");
  const auto size = static_cast<size_t>(dtype_size(in.kv_cache.dtype()));
  int64_t changed = 0;
  for (int64_t e = 0; e < in.kv_cache.numel(); ++e) {
    const bool same = std::memcmp(got.kv_cache.data() + static_cast<size_t>(e) * size,
                                  in.kv_cache.data() + static_cast<size_t>(e) * size, size) == 0;
    if (!written[static_cast<size_t>(e)]) {
      if (!same) RC_LOG() << "cache element " << e << " changed outside the new tokens' slots\n";
      RC_ASSERT(same);
    } else if (!same) {
      ++changed;
    }
  }
  RC_CLASSIFY(changed > 0, "slots changed");
}

// The same call in the jax dialect: q, the updated cache unpacked into kv_pages [P, S, 2 Hkv,
// D] (K of kv head h at 2h, V at 2h + 1), page_indices [N, pps], num_seqs = k. Only for
// options with a jax meaning: causal, no q_scale, k_scale / v_scale unset (the generator's
// choices are overridden to that), mask_value <= -1e30 (every generated one).
Inputs jax_equivalent(Dialect d, const V3Inputs& in, const Tensor& cache, int64_t pps) {
  const V3CacheLayout layout(d, cache.dtype(), in.keys.dim(1), in.queries.dim(2));
  const int64_t pages = cache.dim(0), ps = cache.dim(1), hkv = in.keys.dim(1),
                dim = in.queries.dim(2);
  const int64_t n = in.kv_lens.dim(0);
  Inputs j;
  j.q = in.queries;
  j.kv_pages = Tensor(cache.dtype(), {pages, ps, 2 * hkv, dim});
  for (int64_t q = 0; q < pages; ++q) {
    for (int64_t s = 0; s < ps; ++s) {
      const int64_t rec = layout.token_offset(q, s, ps);
      for (int64_t h = 0; h < hkv; ++h) {
        const int64_t to = ((q * ps + s) * 2 * hkv + 2 * h) * dim;
        copy_elems(cache, rec + layout.k_offset(h), j.kv_pages, to, dim);
        copy_elems(cache, rec + layout.v_offset(h), j.kv_pages, to + dim, dim);
      }
    }
  }
  j.kv_lens = in.kv_lens;
  j.page_indices = Tensor(DType::kInt32, {n, pps});
  copy_elems(in.page_indices, 0, j.page_indices, 0, n * pps);
  // Entries no sequence reads may hold garbage; jax's strict mode checks every entry.
  for (int64_t e = 0; e < n * pps; ++e) {
    const int64_t q = j.page_indices.int_at(e);
    if (q < 0 || q >= pages) j.page_indices.set_int(e, 0);
  }
  j.cu_q_lens = in.cu_q_lens;
  j.num_seqs = Tensor(DType::kInt32, {1});
  j.num_seqs.set_int(0, in.distribution.int_at(2));
  return j;
}

RC_GTEST_PROP(V3Metamorphic, PackedLayoutEqualsJaxLayout, ()) {
  V3CaseSpec spec = *gen_v3_case();
  spec.params.use_causal_mask = true;
  spec.params.skip_kv_mask = false;
  spec.params.q_scale = spec.params.k_scale = spec.params.v_scale = std::nullopt;
  spec.sink = V3Sink::kNone;
  // The jax dialect tiles its combined kv heads by the KV packing (can_be_xla_fully_tiled):
  // the next kv head count it can express (8 always is).
  while (!can_be_xla_fully_tiled(2 * spec.num_kv_heads, dtype_packing(spec.kv_dtype))) {
    ++spec.num_kv_heads;
  }
  const Dialect d = spec.dialect;
  const V3Materialized m = materialize_v3(spec);
  assert_v3_strict_valid(d, m.inputs, m.params);
  const V3KernelResult v3 = v3_tiled_attention(d, m.inputs, m.params, {.threads = 1});
  const Inputs j = jax_equivalent(d, m.inputs, v3.kv_cache, spec.pages_per_seq());
  Params jp;
  jp.sm_scale = m.params.sm_scale;
  jp.sliding_window = m.params.sliding_window;
  jp.soft_cap = m.params.soft_cap;
  jp.mask_value = m.params.mask_value;
  // The same KV block where jax's strict mode takes it; else its own plan's.
  jp.num_kv_pages_per_block = v3_kv_pages_per_block(d, m.inputs, m.params);
  jp.num_queries_per_block = 8;
  std::optional<Failure> f = validate(j, jp, {.mode = Mode::kStrict});
  if (f) {
    RC_LOG() << "jax strict with v3's KV block: " << verdict_text(f) << "\n";
    jp.num_kv_pages_per_block = jp.num_queries_per_block = std::nullopt;
    f = validate(j, jp, {.mode = Mode::kStrict});
  }
  RC_LOG() << "jax strict: " << verdict_text(f) << "\n";
  if (f && !is_pallas_departure(f->rule)) {
    // A call the jax dialect cannot express (e.g. float8 KV whose combined heads do not tile
    // its packing): nothing to compare. Counted in the tags. (Where the Pallas kernel only
    // departs from the definition, the default schedule computes the definition anyway.)
    RC_TAG("jax strict rejects", std::string(rule_info(f->rule).name));
    return;
  }
  const Tensor out = tiled_attention(j, jp, {.threads = 1});
  const bool same_block = plan_kernel(j, jp, default_target_profile()).blocks.kv_pages_per_block ==
                          v3_kv_pages_per_block(d, m.inputs, m.params);
  RC_CLASSIFY(same_block, "same KV block");
  RC_TAG(dialect_name(d));
  if (same_block) {
    if (!same_bits(out, v3.out)) RC_LOG() << "outputs differ at the same KV block\n";
    RC_ASSERT(same_bits(out, v3.out));
  } else {
    const V3ReferenceResult ref = v3_reference(d, m.inputs, m.params, Semantics::kKernel);
    assert_v3_agrees(d, m.inputs, m.params, ref, out, v3.kv_cache, "jax layout");
  }
}

// hd64: a sink logit of -inf for every head weighs exp(-inf - m) = 0: the same bits as no sink.
// (On calls that can take sinks: not bfloat16 q with an odd group, strict sink_group_unpacked.)
RC_GTEST_PROP(V3Metamorphic, MinusInfSinkIsNoSink, ()) {
  V3BuildOptions o;
  o.dialect = Dialect::kTpuInferenceV3Hd64;
  V3CaseSpec spec = *gen_v3_case(o);
  RC_PRE(spec.q_dtype != DType::kBFloat16 || spec.q_per_kv % 2 == 0);
  spec.sink = V3Sink::kNone;
  const Dialect d = spec.dialect;
  const V3Materialized m = materialize_v3(spec);
  V3Inputs with = m.inputs;
  Tensor sink(DType::kFloat32, {m.inputs.queries.dim(1)});
  for (int64_t h = 0; h < sink.numel(); ++h)
    sink.set_float(h, -std::numeric_limits<float>::infinity());
  with.attention_sink = sink;
  assert_v3_strict_valid(d, with, m.params);
  const V3KernelResult a = v3_tiled_attention(d, m.inputs, m.params, {.threads = 1});
  const V3KernelResult b = v3_tiled_attention(d, with, m.params, {.threads = 1});
  RC_ASSERT(same_bits(a.out, b.out));
  RC_ASSERT(same_bits(a.kv_cache, b.kv_cache));
}

}  // namespace
}  // namespace rpa::props
