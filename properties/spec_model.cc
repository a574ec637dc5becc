#include "properties/spec_model.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernel/heads_per_block.h"
#include "kernel/target_profile.h"
#include "kernel/vmem_budget.h"

namespace rpa::props {
namespace {

std::string S(int64_t v) { return std::to_string(v); }

// The dimensions of the final arrays, when their ranks let them be named.
struct Dims {
  int64_t T = 0, Hq = 0, D = 0, P = 0, S = 0, Hc = 0, Dk = 0, N = 0, pps = 0;
};

std::optional<Dims> dims_of(const Inputs& in) {
  if (in.q.rank() != 3 || in.kv_pages.rank() != 4 || in.page_indices.rank() != 2) {
    return std::nullopt;
  }
  return Dims{in.q.dim(0),           in.q.dim(1),        in.q.dim(2),        in.kv_pages.dim(0),
              in.kv_pages.dim(1),    in.kv_pages.dim(2), in.kv_pages.dim(3), in.page_indices.dim(0),
              in.page_indices.dim(1)};
}

bool int32_vector(const Tensor& t, int64_t n) {
  return t.dtype() == DType::kInt32 && t.rank() == 1 && t.dim(0) == n;
}

// JAX checks num_kv_pages_per_block against pages_per_seq, which the kernel would clamp.
void jax_block_range(const Params& p, const Dims& d, std::vector<Failure>& out) {
  const auto& b = p.num_kv_pages_per_block;
  if (b && !(*b > 0 && *b <= d.pps)) {
    out.push_back({RuleId::kv_pages_per_block_range,
                   "num_kv_pages_per_block=" + S(*b) + " must be in range (0, " + S(d.pps) + "]."});
  }
}

// JAX's pages_per_seq check takes the max over every kv_lens slot, padding included, and
// computes cdiv in int32.
void jax_pages_per_seq(const Inputs& in, const Dims& d, std::vector<Failure>& out) {
  if (d.N == 0 || d.S == 0 || !int32_vector(in.kv_lens, d.N)) return;
  int64_t max_kv = in.kv_lens.int_at(0);
  for (int64_t i = 1; i < d.N; ++i) max_kv = std::max(max_kv, in.kv_lens.int_at(i));
  const auto sum =
      static_cast<int32_t>(static_cast<uint32_t>(max_kv) + static_cast<uint32_t>(d.S - 1));
  const int64_t min_pages = sum / d.S;
  if (d.pps < min_pages) {
    out.push_back({RuleId::pages_per_seq_too_small,
                   "pages_per_seq=" + S(d.pps) +
                       " must be greater or equal to min_pages_per_seq=" + S(min_pages) +
                       " given max_kv_len=" + S(max_kv) + " and page_size=" + S(d.S) + "."});
  }
}

bool kernel_dtype(DType t, bool kv) {
  return t == DType::kFloat32 || t == DType::kBFloat16 ||
         (kv && (t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2));
}

// The strict VMEM budget: the given blocks, or JAX's defaults, which shrink down to (1, 1),
// must fit the given limit or the default scoped one. Evaluated only where the earlier
// rules leave the budget defined.
void strict_vmem_budget(const Inputs& in, const Params& p, const Dims& d,
                        std::vector<Failure>& out) {
  const DType qt = in.q.dtype(), kt = in.kv_pages.dtype();
  if (!kernel_dtype(qt, false) || !kernel_dtype(kt, true)) return;
  if (d.Hc == 0 || d.Hc % 2 != 0 || d.Hq == 0 || d.D == 0 || d.S == 0) return;
  const int64_t hkv = d.Hc / 2;
  if (d.Hq % hkv != 0) return;
  const auto& bkv = p.num_kv_pages_per_block;
  const auto& bq = p.num_queries_per_block;
  const auto& vmem = p.vmem_limit_bytes;
  const TargetProfile& target = default_target_profile();
  if (bkv.has_value() != bq.has_value() || (bkv && (*bkv <= 0 || *bq <= 0))) return;
  if (vmem && (*vmem <= 0 || *vmem > target.vmem_capacity_bytes)) return;
  const auto heads = min_heads_per_block(d.Hq, d.Hc, qt, kt);
  if (!heads) return;
  const VmemShape shape{.page_size = d.S,
                        .head_dim = d.D,
                        .q_heads_per_kv = d.Hq / hkv,
                        .heads = *heads,
                        .q_dtype = qt,
                        .kv_dtype = kt};
  const int64_t limit = vmem.value_or(default_scoped_vmem_limit(target));
  const std::string limit_text =
      vmem ? "vmem_limit_bytes=" + S(limit) : "the default scoped limit of " + S(limit) + " bytes";
  const BlockSizes blocks = bkv ? BlockSizes{*bkv, *bq} : BlockSizes{1, 1};
  const int64_t need = vmem_need_bytes(shape, blocks);
  if (need <= limit) return;
  const std::string sizes = "num_kv_pages_per_block=" + S(blocks.kv_pages_per_block) +
                            " and num_queries_per_block=" + S(blocks.queries_per_block) + " need " +
                            S(need) + " bytes of VMEM, more than " + limit_text + ".";
  out.push_back({RuleId::vmem_budget_exceeded, bkv ? sizes : "no block sizes fit: " + sizes});
}

// Where a rule's failure falls in the mode's reporting order (smaller first): table order,
// except that jax mode meets a float num_seqs right after its pages_per_seq check and
// reports page_size_zero and a negative num_seqs after everything else (rule.h).
int report_rank(RuleId rule, Mode mode) {
  const int index = static_cast<int>(rule);
  if (mode == Mode::kStrict) return 2 * index;
  if (rule == RuleId::num_seqs_dtype)
    return 2 * static_cast<int>(RuleId::pages_per_seq_too_small) + 1;
  if (rule == RuleId::page_size_zero || rule == RuleId::num_seqs_negative) return 1000 + index;
  return 2 * index;
}

}  // namespace

std::string verdict_text(const std::optional<Failure>& f) {
  return f ? std::string(rule_info(f->rule).name) + ": " + f->message : "valid";
}

std::optional<Failure> expected_failure(const Materialized& m, Mode mode) {
  std::vector<Failure> candidates;
  for (const Declared& d : m.declared) {
    if (d.mode == mode) candidates.push_back(d.failure);
  }
  if (const std::optional<Dims> d = dims_of(m.inputs)) {
    if (mode == Mode::kJax) {
      jax_block_range(m.params, *d, candidates);
      jax_pages_per_seq(m.inputs, *d, candidates);
    } else {
      strict_vmem_budget(m.inputs, m.params, *d, candidates);
    }
  }
  if (candidates.empty()) return std::nullopt;
  return *std::min_element(candidates.begin(), candidates.end(),
                           [mode](const Failure& a, const Failure& b) {
                             return report_rank(a.rule, mode) < report_rank(b.rule, mode);
                           });
}

}  // namespace rpa::props
