// Metamorphic properties (DESIGN.md section 9): changes that the definition says cannot
// matter leave the outputs unchanged. Bit-identical where the kernel's arithmetic is the
// same operation for operation (page permutation, garbage, soft_cap sign, a window that
// covers every key, thread count); within the tolerance where the schedule changes the
// float32 summation order (block sizes, sequence order, GQA vs MHA heads blocks).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"
#include "kernel/jax_kernel.h"
#include "oracle/compare.h"
#include "casegen/jax_departed_rows.h"
#include "properties/jax_kernel_check.h"
#include "casegen/jax_materialize.h"
#include "properties/jax_rc_case.h"
#include "casegen/jax_spec_model.h"
#include "reference/jax_reference.h"
#include "validation/jax_validate.h"

namespace rpa::props {
namespace {

// The transformed case is still valid by the definition: strict mode accepts it, or
// rejects it only for a departure of the Pallas kernel from the definition (which a
// transformation may create or remove, e.g. by moving an empty sequence), exactly as the
// spec model's walk of the program says. The default schedule computes the definition
// either way. Returns whether strict mode accepts.
bool assert_definition_valid(const Inputs& in, const Params& p) {
  const std::optional<Failure> f = validate(in, p, {.mode = Mode::kStrict});
  RC_LOG() << "strict: " << verdict_text(f) << "\n";
  if (!f) return true;
  RC_ASSERT(is_pallas_departure(f->rule));
  RC_ASSERT(f == expected_failure(in, p, {}, Mode::kStrict));
  return false;
}

void copy_bytes(const Tensor& from, int64_t from_elem, Tensor& to, int64_t to_elem, int64_t n) {
  if (n == 0) return;  // empty tensors may have no storage at all
  const int64_t size = dtype_size(from.dtype());
  std::memcpy(to.data() + to_elem * size, from.data() + from_elem * size,
              static_cast<size_t>(n * size));
}

// Physical page p moves to perm[p]; page_indices follow it.
Inputs permute_pages(const Inputs& in, const std::vector<int64_t>& perm) {
  Inputs out = in;
  const int64_t P = in.kv_pages.dim(0);
  const int64_t page_elems = in.kv_pages.numel() / std::max<int64_t>(P, 1);
  for (int64_t p = 0; p < P; ++p) {
    copy_bytes(in.kv_pages, p * page_elems, out.kv_pages, perm[static_cast<size_t>(p)] * page_elems,
               page_elems);
  }
  for (int64_t e = 0; e < in.page_indices.numel(); ++e) {
    const int64_t v = in.page_indices.int_at(e);
    if (v >= 0 && v < P) out.page_indices.set_int(e, perm[static_cast<size_t>(v)]);
  }
  return out;
}

// Sequence k of the result is sequence order[k] of `in`, with its q rows, kv_len and page
// row; padding slots and rows stay where they were.
Inputs reorder_sequences(const Inputs& in, const std::vector<int64_t>& order) {
  const PagedKvView v = kv_view(in);
  Inputs out = in;
  const int64_t row_elems = v.num_q_heads() * v.head_dim();
  const int64_t pps = v.pages_per_seq();
  int64_t row = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const int64_t s = order[k];
    const auto sk = static_cast<int64_t>(k);
    copy_bytes(in.q, v.q_start(s) * row_elems, out.q, row * row_elems, v.q_len(s) * row_elems);
    out.kv_lens.set_int(sk, v.kv_len(s));
    copy_bytes(in.page_indices, s * pps, out.page_indices, sk * pps, pps);
    row += v.q_len(s);
    out.cu_q_lens.set_int(sk + 1, row);
  }
  return out;
}

// Rows of `reordered` (an output of reorder_sequences(in, order)) moved back to in's order.
Tensor restore_rows(const Tensor& reordered, const Inputs& in, const std::vector<int64_t>& order) {
  const PagedKvView v = kv_view(in);
  const int64_t row_elems = v.num_q_heads() * v.head_dim();
  Tensor out = reordered;
  int64_t row = 0;
  for (int64_t s : order) {
    copy_bytes(reordered, row * row_elems, out, v.q_start(s) * row_elems, v.q_len(s) * row_elems);
    row += v.q_len(s);
  }
  return out;
}

// One kv head per query head: head h reads a copy of kv head h / (Hq / Hkv).
Inputs repeat_kv_heads(const Inputs& in) {
  const PagedKvView v = kv_view(in);
  const int64_t Hq = v.num_q_heads(), D = v.head_dim(), ratio = v.q_heads_per_kv();
  const int64_t tokens = in.kv_pages.dim(0) * in.kv_pages.dim(1);
  const int64_t Hc = in.kv_pages.dim(2);
  Inputs out = in;
  out.kv_pages = Tensor(in.kv_pages.dtype(), {in.kv_pages.dim(0), in.kv_pages.dim(1), 2 * Hq, D});
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = 0; h < Hq; ++h) {
      for (int64_t kv = 0; kv < 2; ++kv) {
        copy_bytes(in.kv_pages, (t * Hc + 2 * (h / ratio) + kv) * D, out.kv_pages,
                   (t * 2 * Hq + 2 * h + kv) * D, D);
      }
    }
  }
  return out;
}

RC_GTEST_PROP(Metamorphic, PagePermutationIsBitIdentical, ()) {
  const CaseSpec spec = *gen_valid_case();
  const Materialized m = materialize(spec);
  const std::vector<int64_t> perm = gen_permutation(spec.num_pages, "page swap");
  RC_CLASSIFY(std::is_sorted(perm.begin(), perm.end()), "identity permutation");
  const Inputs permuted = permute_pages(m.inputs, perm);
  assert_definition_valid(permuted, m.params);
  RC_ASSERT(tiled_attention(permuted, m.params) == tiled_attention(m.inputs, m.params));
  RC_ASSERT(dense_reference(permuted, m.params).out == dense_reference(m.inputs, m.params).out);
}

RC_GTEST_PROP(Metamorphic, SequenceOrderOnlyMovesRows, ()) {
  BuildOptions two;
  two.min_seqs = 2;
  const CaseSpec spec = *gen_valid_case(two);
  const Materialized m = materialize(spec);
  const std::vector<int64_t> order = gen_permutation(spec.num_seqs(), "sequence swap");
  RC_CLASSIFY(std::is_sorted(order.begin(), order.end()), "identity order");
  const Inputs reordered = reorder_sequences(m.inputs, order);
  assert_definition_valid(reordered, m.params);
  const ReferenceResult ref = dense_reference(m.inputs, m.params);
  RC_ASSERT(restore_rows(dense_reference(reordered, m.params).out, m.inputs, order) == ref.out);
  // Query blocks now group other rows together: same math, other float32 order.
  assert_agrees(m.inputs, m.params,
                restore_rows(tiled_attention(reordered, m.params), m.inputs, order), ref);
}

// Everything the definition never reads: NaN or finite filler, other garbage page
// indices, other padding kv_lens and cu_q_lens.
RC_GTEST_PROP(Metamorphic, GarbageIsNeverRead, ()) {
  const CaseSpec spec = *gen_valid_case();
  CaseSpec other = spec;
  other.nan_garbage = !spec.nan_garbage;
  const int64_t salt = *rc::gen::inRange<int64_t>(1, 1000).as("garbage salt");
  for (int64_t i = 0; i < spec.max_num_seqs; ++i) {
    for (int64_t j = read_page_entries(spec, i); j < spec.pages_per_seq; ++j) {
      other.page_indices[static_cast<size_t>(i * spec.pages_per_seq + j)] = -salt - j;
    }
  }
  // kv_lens[0] is no garbage to the kernel when no sequence is in use (its first DMA counts
  // slot 0's pages with it; build_case keeps it to one page).
  for (size_t k = spec.num_seqs() == 0 ? 1 : 0; k < other.pad_kv_lens.size(); ++k) {
    other.pad_kv_lens[k] = salt * 1000;
  }
  for (int64_t& v : other.pad_cu_q_lens) v = -salt;
  const Materialized a = materialize(spec);
  const Materialized b = materialize(other);
  const bool accepted = assert_definition_valid(b.inputs, b.params);
  RC_ASSERT(tiled_attention(b.inputs, b.params) == tiled_attention(a.inputs, a.params));
  const ReferenceResult ref = dense_reference(a.inputs, a.params);
  RC_ASSERT(dense_reference(b.inputs, b.params).out == ref.out);
  // The literal schedule copies the garbage into its buffer and must zero it there. Where
  // the Pallas kernel departs from the definition it computes some rows over another
  // sequence's pages, garbage slots included, by design: the other defined rows must still
  // be bit-identical, and so must every row (past cu_q_lens[num_seqs] too) where strict
  // mode accepts.
  const KernelOptions literal{.literal_schedule = true};
  const Tensor lit_a = tiled_attention(a.inputs, a.params, literal);
  const Tensor lit_b = tiled_attention(b.inputs, b.params, literal);
  RC_CLASSIFY(!accepted, "Pallas departs from the definition");
  if (accepted) {
    RC_ASSERT(lit_b == lit_a);
    return;
  }
  const DepartedRows departed = departed_rows(a.inputs, a.params, literal);
  const Comparison c = compare_outputs(with_departed_rows_from(lit_b, ref.out, departed),
                                       with_departed_rows_from(lit_a, ref.out, departed),
                                       kv_view(a.inputs), Tolerance{});
  RC_LOG() << "literal, garbage vs other garbage, other rows: " << describe_mismatch(c) << "\n";
  RC_ASSERT(c.agree());
}

RC_GTEST_PROP(Metamorphic, BlockSizesAndThreadsKeepTheAnswer, ()) {
  const CaseSpec spec = *gen_valid_case();
  const Materialized m = materialize(spec);
  Params p = m.params;
  p.num_kv_pages_per_block = *rc::gen::inRange<int64_t>(1, spec.pages_per_seq + 3).as("bkv");
  p.num_queries_per_block =
      *rc::gen::inRange<int64_t>(1, std::min<int64_t>(spec.max_num_batched_tokens + 3, 513))
           .as("bq");
  p.vmem_limit_bytes = default_target_profile().vmem_capacity_bytes;
  const int threads = *rc::gen::inRange(1, 3).as("threads");
  assert_definition_valid(m.inputs, p);
  // The reference ignores tuning: one answer for both.
  const ReferenceResult ref = dense_reference(m.inputs, m.params);
  RC_ASSERT(dense_reference(m.inputs, p).out == ref.out);
  assert_agrees(m.inputs, p, tiled_attention(m.inputs, p, {.threads = threads}), ref);
  assert_agrees(m.inputs, m.params, tiled_attention(m.inputs, m.params, {.threads = 1}), ref);
}

RC_GTEST_PROP(Metamorphic, GqaEqualsRepeatedKvHeads, ()) {
  BuildOptions gqa;
  gqa.gqa = true;
  const CaseSpec spec = *gen_valid_case(gqa);
  const Materialized m = materialize(spec);
  const Inputs mha = repeat_kv_heads(m.inputs);
  Params p = m.params;
  // More kv heads per block need more VMEM.
  p.vmem_limit_bytes = default_target_profile().vmem_capacity_bytes;
  assert_definition_valid(mha, p);
  const ReferenceResult ref = dense_reference(m.inputs, m.params);
  RC_ASSERT(dense_reference(mha, p).out == ref.out);
  const Tensor kernel_mha = tiled_attention(mha, p);
  assert_agrees(m.inputs, m.params, kernel_mha, ref);
  // The kernel against itself: a head mapping bug shows only where heads share kv heads.
  assert_kernels_agree(m.inputs, m.params, tiled_attention(m.inputs, m.params), kernel_mha, ref);
}

// The literal schedule (the Pallas program: every slot copied, padded slots zeroed and
// computed over, the prefetch chain deciding which block each step reads) gives the
// definition's answer, and the default schedule's, wherever strict mode accepts. Where the
// Pallas kernel departs from the definition (stale_kv_block, rows_not_computed) it does so
// only in the rows the departure names: every other defined row is still the definition.
RC_GTEST_PROP(Metamorphic, LiteralScheduleKeepsTheAnswer, ()) {
  const CaseSpec spec = *gen_valid_case();
  const Materialized m = materialize(spec);
  const ReferenceResult ref = dense_reference(m.inputs, m.params);
  const KernelOptions options{.literal_schedule = true};
  const Tensor literal = tiled_attention(m.inputs, m.params, options);
  const std::optional<Failure> strict = validate(m.inputs, m.params, {.mode = Mode::kStrict});
  RC_LOG() << "strict: " << verdict_text(strict) << "\n";
  RC_CLASSIFY(strict.has_value(), "Pallas departs from the definition");
  if (!strict) {
    assert_agrees(m.inputs, m.params, literal, ref);
    assert_kernels_agree(m.inputs, m.params, literal, tiled_attention(m.inputs, m.params), ref);
    return;
  }
  RC_ASSERT(is_pallas_departure(strict->rule));
  const DepartedRows departed = departed_rows(m.inputs, m.params, options);
  RC_ASSERT(departed.any());
  assert_agrees(m.inputs, m.params, with_departed_rows_from(literal, ref.out, departed), ref);
}

RC_GTEST_PROP(Metamorphic, WindowCoveringEveryKeyIsNoWindow, ()) {
  const CaseSpec spec = *gen_valid_case();
  const Materialized m = materialize(spec);
  Params none = m.params, wide = m.params;
  none.sliding_window.reset();
  wide.sliding_window =
      spec.max_kv_len() + *rc::gen::inRange<int64_t>(0, 3).as("window - max kv_len");
  if (*wide.sliding_window == 0) wide.sliding_window = 1;
  RC_ASSERT(tiled_attention(m.inputs, wide) == tiled_attention(m.inputs, none));
  RC_ASSERT(dense_reference(m.inputs, wide).out == dense_reference(m.inputs, none).out);
}

RC_GTEST_PROP(Metamorphic, SoftCapSignDoesNotMatter, ()) {
  const CaseSpec spec = *gen_valid_case();
  const Materialized m = materialize(spec);
  Params pos = m.params, neg = m.params;
  const double cap = *rc::gen::element(0.5, 1.0, 5.0, 30.0).as("soft_cap");
  pos.soft_cap = cap;
  neg.soft_cap = -cap;
  // c * tanh(s / c) is even in c, and tanh is odd in float32 too.
  RC_ASSERT(tiled_attention(m.inputs, neg) == tiled_attention(m.inputs, pos));
  RC_ASSERT(dense_reference(m.inputs, neg).out == dense_reference(m.inputs, pos).out);
}

}  // namespace
}  // namespace rpa::props
