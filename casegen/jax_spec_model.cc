#include "casegen/jax_spec_model.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "kernel/jax_kernel.h"
#include "schedule/jax_program.h"
#include "validation/jax_heads_per_block.h"
#include "validation/jax_program_rules.h"
#include "validation/jax_vmem_budget.h"
#include "validation/target_profile.h"

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

// The strict VMEM budget: the given blocks, or JAX's defaults, which shrink down to (1, 1),
// must fit the given limit or the default scoped one. Evaluated only where the earlier
// rules leave the budget defined.
void strict_vmem_budget(const Inputs& in, const Params& p, const Dims& d,
                        std::vector<Failure>& out) {
  const DType qt = in.q.dtype(), kt = in.kv_pages.dtype();
  if (!is_kernel_q_dtype(qt) || !is_kernel_kv_dtype(kt)) return;
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

// jax mode: where JAX's Pallas kernel itself raises (TPU interpret mode, DESIGN.md section
// 14), after every check JAX makes, in the order the kernel meets them: tracing the wrapper
// and the kernel, then running it.
constexpr RuleId kJaxPallasOrder[] = {RuleId::q_heads_zero,
                                      RuleId::max_num_batched_tokens_zero,
                                      RuleId::queries_per_block_too_large,
                                      RuleId::kv_dtype_unsupported,
                                      RuleId::q_dtype_unsupported,
                                      RuleId::kv_scales_one_sided,
                                      RuleId::sliding_window_too_large,
                                      RuleId::head_dim_not_lane_multiple,
                                      RuleId::pages_per_seq_zero,
                                      RuleId::kv_block_loop_wraps_int32,
                                      RuleId::page_index_out_of_range};

// Where a rule's failure falls in the mode's reporting order (smaller first): table order,
// except that jax mode meets a float num_seqs right after its pages_per_seq check, reports
// page_size_zero and a negative num_seqs after everything else JAX checks, and the Pallas
// kernel's own failures after those (jax_rule.h).
int report_rank(RuleId rule, Mode mode) {
  const int index = static_cast<int>(rule);
  if (mode == Mode::kStrict) return 2 * index;
  if (rule == RuleId::num_seqs_dtype)
    return 2 * static_cast<int>(RuleId::pages_per_seq_too_small) + 1;
  if (rule == RuleId::page_size_zero || rule == RuleId::num_seqs_negative) return 1000 + index;
  const auto* pallas = std::find(std::begin(kJaxPallasOrder), std::end(kJaxPallasOrder), rule);
  if (pallas != std::end(kJaxPallasOrder))
    return 2000 + static_cast<int>(pallas - std::begin(kJaxPallasOrder));
  return 2 * index;
}

constexpr char kNoRows[] =
    "max_num_batched_tokens=0 must be positive (the Pallas kernel reads a block of q";

// jax mode: what the Pallas kernel asserts when tracing, whatever else the call holds (the
// dtype assertions are declared by the mutations that change dtypes): a query block of q
// (JAX's default num_queries_per_block, min(T, 32), is 0 without rows), K and V of one
// dtype (a scale casts its side to q's dtype), head_dim % 128 == 0 (broadcast_to_shape).
void jax_pallas_tracing(const Inputs& in, const Params& p, const Dims& d,
                        std::vector<Failure>& out) {
  if (d.T == 0 && !(p.num_kv_pages_per_block && p.num_queries_per_block)) {
    out.push_back({RuleId::max_num_batched_tokens_zero,
                   std::string(kNoRows) + ", and its default num_queries_per_block would be 0)."});
  }
  const DType qt = in.q.dtype(), kt = in.kv_pages.dtype();
  if (p.k_scale.has_value() != p.v_scale.has_value() && kt != qt) {
    const std::string set = p.k_scale ? "k_scale" : "v_scale";
    const std::string unset = p.k_scale ? "v_scale" : "k_scale";
    out.push_back({RuleId::kv_scales_one_sided,
                   set + " is set and " + unset + " is not: with kv_pages.dtype=" + dtype_repr(kt) +
                       " and q.dtype=" + dtype_repr(qt) +
                       " the Pallas kernel's K and V get different dtypes (it asserts k.dtype == "
                       "v.dtype)."});
  }
  if (d.D == 0 || d.D % 128 != 0) {
    out.push_back({RuleId::head_dim_not_lane_multiple,
                   "head_dim=" + S(d.D) +
                       " must be a positive multiple of 128 for the Pallas kernel "
                       "(broadcast_to_shape asserts head_dim % 128 == 0)."});
  }
}

// Validation walks at most this many steps of the Pallas program (validation/jax_validate.cc's
// bound; past it the program rules are not evaluated). No generated case comes near it.
constexpr int64_t kMaxWalkedSteps = int64_t{1} << 24;

// The preconditions of the Pallas program's walk (schedule/jax_program.h) and of plan_kernel:
// the index arrays as the kernel prefetches them, at least one row of everything the
// grid divides by, block sizes that are blocks, and a heads plan; strict mode also block
// sizes that fit the budget (plan_kernel shrinks JAX's defaults into it).
bool walkable(const Inputs& in, const Params& p, const Dims& d, Mode mode) {
  if (d.N < 1 || d.S < 1 || d.Hq < 1 || d.Hc < 2 || d.Hc % 2 != 0) return false;
  if (!int32_vector(in.kv_lens, d.N) || in.page_indices.dtype() != DType::kInt32 ||
      !int32_vector(in.cu_q_lens, d.N + 1) || !int32_vector(in.num_seqs, 1))
    return false;
  const int64_t ns = in.num_seqs.int_at(0);
  if (ns < 0 || ns > d.N || d.Hq % (d.Hc / 2) != 0) return false;
  const auto& bkv = p.num_kv_pages_per_block;
  const auto& bq = p.num_queries_per_block;
  const bool given = bkv && bq;
  if (given && (*bkv < 1 || *bq < 1)) return false;
  const DType qt = in.q.dtype(), kt = in.kv_pages.dtype();
  if (dtype_packing(qt) == 0 || dtype_packing(kt) == 0) return false;
  const auto heads = min_heads_per_block(d.Hq, d.Hc, qt, kt);
  if (!heads) return false;
  if (mode == Mode::kJax) return true;
  if (d.pps < 1) return false;
  const VmemShape shape{.page_size = d.S,
                        .head_dim = d.D,
                        .q_heads_per_kv = d.Hq / (d.Hc / 2),
                        .heads = *heads,
                        .q_dtype = qt,
                        .kv_dtype = kt};
  const int64_t limit =
      p.vmem_limit_bytes.value_or(default_scoped_vmem_limit(default_target_profile()));
  return given ? vmem_need_bytes(shape, {*bkv, *bq}) <= limit
               : default_block_sizes(shape, d.pps, d.T, limit).has_value();
}

// The rules of the Pallas kernel's program (jax: no q rows under given block sizes, a KV
// loop that wraps int32, a DMA'd page index outside [-P, P); strict: stale_kv_block,
// rows_not_computed), evaluated as validation does, only when nothing else fails. Their model is
// not declarative: it shares the walk of the program with the validator (schedule/jax_program.h),
// because which KV block each buffer half holds follows from the whole prefetch chain. The walk
// itself is checked against the real Pallas kernel in TPU interpret mode by the jax ctest label
// (python -m rpa.jax.cross_check --pallas).
void program_rules(const Inputs& in, const Params& p, const Dims& d, Mode mode,
                   std::vector<Failure>& out) {
  if (!walkable(in, p, d, mode)) return;
  if (mode == Mode::kJax) {
    // Both block sizes are given here (else the tracing check reported it): reading the q
    // block fails when the kernel runs.
    if (d.T == 0) {
      out.push_back({RuleId::max_num_batched_tokens_zero, std::string(kNoRows) + ")."});
      return;
    }
    // pages_per_seq 0: the DMA of page_indices[0, 0] fails (declared by its mutation).
    if (d.pps == 0) return;
  }
  // jax mode: the Pallas kernel takes JAX's untuned block sizes unless both are given.
  const KernelPlan plan =
      plan_kernel(in, p, default_target_profile(), /*untuned_blocks=*/mode == Mode::kJax);
  if (mode == Mode::kJax) {
    const int64_t block_tokens = plan.blocks.kv_pages_per_block * d.S;
    for (int64_t i = 0; i < in.num_seqs.int_at(0); ++i) {
      const int64_t kv_len = in.kv_lens.int_at(i);
      if (kv_loop_wraps_int32(kv_len, block_tokens)) {
        out.push_back({RuleId::kv_block_loop_wraps_int32,
                       "kv_len=" + S(kv_len) + " at sequence " + S(i) +
                           ": the Pallas kernel's KV loop compares kv_blk * " + S(block_tokens) +
                           " with kv_len in int32, which wraps before reaching it."});
        return;
      }
    }
  }
  const PallasGrid grid{.num_heads_blks = plan.num_heads_blks,
                        .num_q_blks = plan.num_q_blks,
                        .kv_pages_per_block = plan.blocks.kv_pages_per_block,
                        .queries_per_block = plan.blocks.queries_per_block};
  if (std::optional<Failure> f = pallas_program_failure(in, grid, mode, kMaxWalkedSteps)) {
    out.push_back(std::move(*f));
  }
}

}  // namespace

std::string verdict_text(const std::optional<Failure>& f) {
  return f ? std::string(rule_info(f->rule).name) + ": " + f->message : "valid";
}

std::optional<Failure> expected_failure(const Inputs& in, const Params& p,
                                        std::span<const Declared> declared, Mode mode) {
  std::vector<Failure> candidates;
  for (const Declared& d : declared) {
    if (d.mode == mode) candidates.push_back(d.failure);
  }
  const std::optional<Dims> d = dims_of(in);
  if (d) {
    if (mode == Mode::kJax) {
      jax_block_range(p, *d, candidates);
      jax_pages_per_seq(in, *d, candidates);
      jax_pallas_tracing(in, p, *d, candidates);
    } else {
      strict_vmem_budget(in, p, *d, candidates);
    }
  }
  // The program rules come last in both modes, and only where nothing failed before.
  if (d && candidates.empty()) program_rules(in, p, *d, mode, candidates);
  if (candidates.empty()) return std::nullopt;
  return *std::min_element(candidates.begin(), candidates.end(),
                           [mode](const Failure& a, const Failure& b) {
                             return report_rank(a.rule, mode) < report_rank(b.rule, mode);
                           });
}

std::optional<Failure> expected_failure(const Materialized& m, Mode mode) {
  return expected_failure(m.inputs, m.params, m.declared, mode);
}

bool is_pallas_departure(RuleId rule) {
  return rule == RuleId::stale_kv_block || rule == RuleId::rows_not_computed;
}

}  // namespace rpa::props
