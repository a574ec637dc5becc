// The TPU-tiled kernel against the dense reference (DESIGN.md sections 2, 5, 6): edge
// sequence lengths around page and KV-block boundaries, every block size, query blocks that
// split a sequence or hold several, every dtype combination strict mode accepts, GQA ratios
// and several heads blocks, the scalar parameters, garbage the definition never reads, and
// the TPU's NaN with mask_value -inf. Every case is strict-valid (asserted) and compared with
// THE comparator (oracle/compare.h) under tolerance_for; the kernel's outputs for 1 and 2
// threads must be bit-identical, and rows at or past cu_q_lens[num_seqs] 0. The exceptions,
// each marked where it calls the kernel without validation: mask_value -inf and -1.0, which
// strict mode rejects for the very behaviour those tests pin down.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"
#include "kernel/jax_kernel.h"
#include "oracle/compare.h"
#include "oracle/jax_tolerance.h"
#include "oracle/tolerance.h"
#include "reference/jax_reference.h"
#include "tests/random_inputs.h"
#include "validation/jax_validate.h"

namespace rpa {
namespace {

using testing::RandomInputsSpec;
using testing::SeqLens;

constexpr DType F32 = DType::kFloat32, BF16 = DType::kBFloat16, E4M3 = DType::kFloat8E4M3FN,
                E5M2 = DType::kFloat8E5M2;

struct DTypes {
  DType q, kv;
};
// Every (q, kv) pair strict mode accepts.
const std::vector<DTypes> kAllDTypes = {
    {F32, F32}, {BF16, BF16}, {BF16, E4M3}, {BF16, E5M2}, {F32, E4M3}};

std::string opt_str(const std::optional<int64_t>& v) {
  return v ? std::to_string(*v) : std::string("None");
}
std::string opt_str(const std::optional<double>& v) {
  if (!v) return "None";
  std::ostringstream os;
  os << *v;
  return os.str();
}

// One line naming a case, for SCOPED_TRACE.
std::string describe(const Inputs& in, const Params& p) {
  const PagedKvView view = kv_view(in);
  std::ostringstream os;
  os << "q " << dtype_name(in.q.dtype()) << " kv " << dtype_name(in.kv_pages.dtype()) << ", Hq "
     << view.num_q_heads() << " Hkv " << view.num_kv_heads() << " D " << view.head_dim() << " S "
     << view.page_size() << " pages_per_seq " << view.pages_per_seq() << " T " << in.q.dim(0)
     << ", seqs (q_len, kv_len):";
  for (int64_t s = 0; s < view.num_seqs(); ++s) {
    os << " (" << view.q_len(s) << ", " << view.kv_len(s) << ")";
  }
  os << "; bkv " << opt_str(p.num_kv_pages_per_block) << " bq " << opt_str(p.num_queries_per_block)
     << " sm_scale " << p.sm_scale << " window " << opt_str(p.sliding_window) << " soft_cap "
     << opt_str(p.soft_cap) << " mask_value " << opt_str(p.mask_value) << " k_scale "
     << opt_str(p.k_scale) << " v_scale " << opt_str(p.v_scale);
  return os.str();
}

RandomInputsSpec spec_of(std::vector<SeqLens> seqs, DTypes dt = {F32, F32}, int64_t num_q_heads = 4,
                         int64_t num_kv_heads = 2, int64_t head_dim = 16, int64_t page_size = 4,
                         uint64_t seed = 1) {
  RandomInputsSpec spec;
  spec.seqs = std::move(seqs);
  spec.q_dtype = dt.q;
  spec.kv_dtype = dt.kv;
  spec.num_q_heads = num_q_heads;
  spec.num_kv_heads = num_kv_heads;
  spec.head_dim = head_dim;
  spec.page_size = page_size;
  spec.seed = seed;
  return spec;
}

Params with_blocks(Params p, int64_t bkv, int64_t bq) {
  p.num_kv_pages_per_block = bkv;
  p.num_queries_per_block = bq;
  return p;
}

int64_t pages_per_seq(const Inputs& in) { return in.page_indices.dim(1); }
int64_t max_tokens(const Inputs& in) { return in.q.dim(0); }

void expect_valid(const Inputs& in, const Params& p) {
  const auto f = validate(in, p);
  ASSERT_FALSE(f.has_value()) << "strict validation rejects the case: " << rule_info(f->rule).name
                              << ": " << f->message;
}

// Elements of defined rows that are NaN.
int64_t count_nan_on_defined_rows(const Tensor& t, const PagedKvView& view) {
  const int64_t n = view.total_q_tokens() * view.num_q_heads() * view.head_dim();
  int64_t nan = 0;
  for (int64_t i = 0; i < n; ++i) nan += std::isnan(t.float_at(i)) ? 1 : 0;
  return nan;
}

// Every element of the rows at or past cu_q_lens[num_seqs] must be +0.
void expect_rows_past_total_zero(const Tensor& t, const PagedKvView& view, const char* what) {
  const int64_t first = view.total_q_tokens() * view.num_q_heads() * view.head_dim();
  int64_t nonzero = 0;
  int64_t first_bad = -1;
  for (int64_t i = first; i < t.numel(); ++i) {
    const double x = t.float_at(i);
    if (x != 0.0 || std::signbit(x)) {
      if (nonzero++ == 0) first_bad = i;
    }
  }
  EXPECT_EQ(nonzero, 0) << what << ": " << nonzero
                        << " elements past cu_q_lens[num_seqs] are not +0, the first at flat "
                           "index "
                        << first_bad << " (row " << first_bad / (t.dim(1) * t.dim(2))
                        << "): " << (first_bad >= 0 ? t.float_at(first_bad) : 0.0);
}

// The check every numeric case goes through: strict validation accepts the case; the
// kernel with 1 and with 2 threads gives the same bits; those agree with the dense
// reference under the one comparator; the reference has no NaN (a strict-valid case never
// does, so a NaN in the kernel is a mismatch); rows past the sequences are 0. Returns the
// kernel's output (empty on a fatal failure).
Tensor expect_kernel_agrees(const Inputs& in, const Params& p) {
  SCOPED_TRACE(describe(in, p));
  expect_valid(in, p);
  if (::testing::Test::HasFatalFailure()) return {};
  const PagedKvView view = kv_view(in);
  const ReferenceResult ref = dense_reference(in, p);
  const Tolerance tol = tolerance_for_case(in, p, ref);
  const Tensor one = tiled_attention(in, p, KernelOptions{.threads = 1});
  const Tensor two = tiled_attention(in, p, KernelOptions{.threads = 2});
  EXPECT_TRUE(one == two) << "threads 1 and 2 give different bits";
  EXPECT_EQ(count_nan_on_defined_rows(ref.out, view), 0) << "the reference has NaN";
  const Comparison c = compare_outputs(one, ref.out, view, tol);
  EXPECT_TRUE(c.agree()) << describe_mismatch(c) << " (atol " << tol.atol << ", rtol " << tol.rtol
                         << ", max abs err " << c.max_abs_err << ")";
  expect_rows_past_total_zero(one, view, "threads 1");
  expect_rows_past_total_zero(two, view, "threads 2");
  return one;
}

// How query blocks of bq rows cut the sequences with rows: the most such sequences one
// block touches, and the most blocks one sequence spans.
struct BlockLayout {
  int64_t max_seqs_per_block = 0;
  int64_t max_blocks_per_seq = 0;
};

BlockLayout layout(const Inputs& in, int64_t bq) {
  const PagedKvView view = kv_view(in);
  BlockLayout l;
  for (int64_t r0 = 0; r0 < max_tokens(in); r0 += bq) {
    int64_t n = 0;
    for (int64_t s = 0; s < view.num_seqs(); ++s) {
      if (view.q_len(s) > 0 && view.q_start(s) < r0 + bq && view.q_end(s) > r0) ++n;
    }
    l.max_seqs_per_block = std::max(l.max_seqs_per_block, n);
  }
  for (int64_t s = 0; s < view.num_seqs(); ++s) {
    if (view.q_len(s) == 0) continue;
    const int64_t blocks = (view.q_end(s) - 1) / bq - view.q_start(s) / bq + 1;
    l.max_blocks_per_seq = std::max(l.max_blocks_per_seq, blocks);
  }
  return l;
}

// ---- Edge lengths ------------------------------------------------------------------------

// Page size S = 4 and KV blocks of bkv = 3 pages (12 tokens).
constexpr int64_t kS = 4;
constexpr int64_t kBkv = 3;
// 1, S - 1, S, S + 1, bkv * S - 1, bkv * S, 3 * bkv * S + 1.
const std::vector<int32_t> kEdgeKvLens = {1, 3, 4, 5, 11, 12, 37};
static_assert(kS == 4 && kBkv == 3, "kEdgeKvLens spells the edges out for S 4, bkv 3");

enum class QLen { kZero, kOne, kAll };

struct EdgeCase {
  int32_t kv_len;
  QLen q;
  DTypes dt;
};

std::string edge_name(const ::testing::TestParamInfo<EdgeCase>& info) {
  const EdgeCase& e = info.param;
  const char* q = e.q == QLen::kZero ? "q0" : e.q == QLen::kOne ? "q1" : "qkv";
  return "kv" + std::to_string(e.kv_len) + "_" + q + "_" + std::string(dtype_name(e.dt.q)) + "_" +
         std::string(dtype_name(e.dt.kv));
}

std::vector<EdgeCase> edge_cases() {
  std::vector<EdgeCase> out;
  for (const DTypes dt : {DTypes{F32, F32}, DTypes{BF16, BF16}}) {
    for (const int32_t kv : kEdgeKvLens) {
      for (const QLen q : {QLen::kZero, QLen::kOne, QLen::kAll}) out.push_back({kv, q, dt});
    }
  }
  return out;
}

void PrintTo(const EdgeCase& e, std::ostream* os) {
  *os << edge_name(::testing::TestParamInfo<EdgeCase>(e, 0));
}

class TiledKernelEdgeLengths : public ::testing::TestWithParam<EdgeCase> {};

// The edge sequence first (a q_len 0 one leaves an empty range in cu_q_lens before a real
// sequence), a short neighbour, and the edge sequence again last (its rows end where the
// NaN padding rows of q begin). Query blocks of 1, 7, 32 and more than T rows.
TEST_P(TiledKernelEdgeLengths, AgreesWithReference) {
  const EdgeCase& e = GetParam();
  const int32_t q_len = e.q == QLen::kZero ? 0 : e.q == QLen::kOne ? 1 : e.kv_len;
  const Inputs in =
      testing::random_inputs(spec_of({{q_len, e.kv_len}, {3, 6}, {q_len, e.kv_len}}, e.dt, 4, 2, 16,
                                     kS, static_cast<uint64_t>(e.kv_len)));
  ASSERT_GE(pages_per_seq(in), kBkv);
  for (const int64_t bq : {int64_t{1}, int64_t{7}, int64_t{32}, max_tokens(in) + 1}) {
    expect_kernel_agrees(in, with_blocks({}, kBkv, bq));
  }
}

INSTANTIATE_TEST_SUITE_P(Edges, TiledKernelEdgeLengths, ::testing::ValuesIn(edge_cases()),
                         edge_name);

// ---- Block sizes -------------------------------------------------------------------------

// A mixed batch (decode rows, prefills, a q_len 0 sequence, kv_len 1) under every KV block
// size from 1 to pages_per_seq + 1 (strict accepts the + 1: the kernel clamps page slots)
// and query blocks of 1, 7, 32 and more than T rows.
TEST(TiledKernelBlocks, EveryBlockSizeAgrees) {
  const std::vector<SeqLens> seqs = {{1, 13}, {7, 7}, {0, 9}, {17, 18}, {1, 1}, {12, 20}, {3, 3}};
  for (const DTypes dt : {DTypes{F32, F32}, DTypes{BF16, BF16}}) {
    const Inputs in = testing::random_inputs(spec_of(seqs, dt));
    const int64_t pps = pages_per_seq(in);
    ASSERT_EQ(pps, 6);
    ASSERT_GT(max_tokens(in), 32);
    for (int64_t bkv = 1; bkv <= pps + 1; ++bkv) {
      for (const int64_t bq : {int64_t{1}, int64_t{7}, int64_t{32}, max_tokens(in) + 1}) {
        expect_kernel_agrees(in, with_blocks({}, bkv, bq));
      }
    }
    // No block sizes given: JAX's defaults, (min(pages_per_seq, 128), min(T, 32)).
    expect_kernel_agrees(in, Params{});
    EXPECT_EQ(plan_kernel(in, Params{}, default_target_profile()).blocks, (BlockSizes{pps, 32}));
  }
}

// The batch above really has query blocks that split a sequence and blocks that hold
// several sequences, for the block sizes that claim so.
TEST(TiledKernelBlocks, QueryBlocksSplitAndShareSequences) {
  const Inputs in = testing::random_inputs(
      spec_of({{1, 13}, {7, 7}, {0, 9}, {17, 18}, {1, 1}, {12, 20}, {3, 3}}));
  for (const int64_t bq : {int64_t{7}, int64_t{32}}) {
    SCOPED_TRACE("bq " + std::to_string(bq));
    const BlockLayout l = layout(in, bq);
    EXPECT_GE(l.max_seqs_per_block, 2);
    EXPECT_GE(l.max_blocks_per_seq, 2);
  }
  EXPECT_EQ(layout(in, 1).max_seqs_per_block, 1);
  EXPECT_EQ(layout(in, max_tokens(in) + 1).max_seqs_per_block, 6);
  EXPECT_EQ(layout(in, max_tokens(in) + 1).max_blocks_per_seq, 1);
}

// ---- Dtypes, GQA, parameters --------------------------------------------------------------

struct DTypeGqaCase {
  DTypes dt;
  int64_t ratio;  // q heads per kv head
};

std::string dtype_gqa_name(const ::testing::TestParamInfo<DTypeGqaCase>& info) {
  return std::string(dtype_name(info.param.dt.q)) + "_" +
         std::string(dtype_name(info.param.dt.kv)) + "_gqa" + std::to_string(info.param.ratio);
}

std::vector<DTypeGqaCase> dtype_gqa_cases() {
  std::vector<DTypeGqaCase> out;
  for (const DTypes dt : kAllDTypes) {
    for (const int64_t ratio : {1, 2, 4, 8}) out.push_back({dt, ratio});
  }
  return out;
}

void PrintTo(const DTypeGqaCase& c, std::ostream* os) {
  *os << dtype_gqa_name(::testing::TestParamInfo<DTypeGqaCase>(c, 0));
}

class TiledKernelDTypeGqa : public ::testing::TestWithParam<DTypeGqaCase> {};

// Two kv heads (float8 KV needs an even number, combined heads % 4 == 0), 2 to 16 q heads,
// plain, windowed and capped, and scaled; explicit and default block sizes.
TEST_P(TiledKernelDTypeGqa, AgreesWithReference) {
  const DTypeGqaCase& c = GetParam();
  const Inputs in =
      testing::random_inputs(spec_of({{1, 21}, {6, 6}, {9, 14}, {0, 3}, {1, 2}}, c.dt, 2 * c.ratio,
                                     2, 16, 4, static_cast<uint64_t>(c.ratio)));
  Params windowed;
  windowed.sliding_window = 5;
  windowed.soft_cap = 50.0;
  Params scaled;
  scaled.sm_scale = 0.125;
  scaled.k_scale = 0.5;
  scaled.v_scale = 2.0;
  for (const Params& p : {Params{}, windowed, scaled}) {
    expect_kernel_agrees(in, with_blocks(p, 2, 8));
    expect_kernel_agrees(in, p);
  }
}

INSTANTIATE_TEST_SUITE_P(DTypes, TiledKernelDTypeGqa, ::testing::ValuesIn(dtype_gqa_cases()),
                         dtype_gqa_name);

struct NamedParams {
  const char* name;
  Params p;
};

std::vector<NamedParams> parameter_sets(int64_t max_kv_len) {
  std::vector<NamedParams> out;
  auto add = [&](const char* name, auto set) {
    Params p;
    set(p);
    out.push_back({name, p});
  };
  add("window_1", [](Params& p) { p.sliding_window = 1; });
  add("window_5", [](Params& p) { p.sliding_window = 5; });
  add("window_max_kv_len", [&](Params& p) { p.sliding_window = max_kv_len; });
  add("window_1000", [](Params& p) { p.sliding_window = 1000; });
  add("soft_cap_5", [](Params& p) { p.soft_cap = 5.0; });
  add("soft_cap_50", [](Params& p) { p.soft_cap = 50.0; });
  add("sm_scale_0.125", [](Params& p) { p.sm_scale = 0.125; });
  add("mask_value_default_explicit", [](Params& p) { p.mask_value = kDefaultMaskValue; });
  add("mask_value_-1e30", [](Params& p) { p.mask_value = -1e30; });
  add("mask_value_-flt_max",
      [](Params& p) { p.mask_value = -static_cast<double>(std::numeric_limits<float>::max()); });
  add("window_5_mask_value_-1e30", [](Params& p) {
    p.sliding_window = 5;
    p.mask_value = -1e30;
  });
  add("k_scale_v_scale", [](Params& p) {
    p.k_scale = 0.5;
    p.v_scale = 2.0;
  });
  add("k_scale_only", [](Params& p) { p.k_scale = 3.0; });
  add("v_scale_only", [](Params& p) { p.v_scale = 0.25; });
  add("everything", [](Params& p) {
    p.sliding_window = 5;
    p.soft_cap = 5.0;
    p.sm_scale = 0.125;
    p.k_scale = 1.5;
    p.v_scale = 0.75;
  });
  return out;
}

// Sliding window 1, 5 and >= kv_len, soft caps, sm_scale, scales, in float32 and bfloat16,
// against KV blocks of 1 and 3 pages and query blocks of 5 and 32 rows.
TEST(TiledKernelParams, AgreesWithReference) {
  const std::vector<SeqLens> seqs = {{1, 19}, {11, 11}, {4, 16}, {1, 1}, {0, 5}, {8, 25}};
  for (const DTypes dt : {DTypes{F32, F32}, DTypes{BF16, BF16}, DTypes{F32, E5M2}}) {
    const Inputs in = testing::random_inputs(spec_of(seqs, dt, 4, 2, 16, 4, 7));
    for (const NamedParams& np : parameter_sets(25)) {
      SCOPED_TRACE(np.name);
      for (const int64_t bkv : {1, 3}) {
        for (const int64_t bq : {5, 32}) expect_kernel_agrees(in, with_blocks(np.p, bkv, bq));
      }
    }
  }
}

// A window at least as long as every sequence masks nothing: the same bits as no window.
TEST(TiledKernelParams, WindowAtLeastKvLenIsNoWindow) {
  const Inputs in = testing::random_inputs(spec_of({{1, 19}, {11, 11}, {8, 25}}));
  const Params none = with_blocks({}, 2, 8);
  const Tensor want = expect_kernel_agrees(in, none);
  for (const int64_t w : {25, 26, 1 << 20}) {
    Params p = none;
    p.sliding_window = w;
    SCOPED_TRACE("window " + std::to_string(w));
    EXPECT_TRUE(expect_kernel_agrees(in, p) == want);
  }
}

// ---- mask_value -1.0: added, not substituted ----------------------------------------------

// Strict mode requires mask_value <= -1e30 (mask_value_too_large): the TPU kernel adds
// mask_value to the zero-filled slots past kv_len of a sequence's last KV block, so a mask
// value whose exp() does not underflow lets them into the softmax, which the definition
// never does. These two tests call the kernel on mask_value -1.0 WITHOUT validation (strict
// rejects it, as each asserts) to pin down the kernel's mask itself.
//
// On whole KV blocks there are no such slots: the mask is added, not substituted, so keys
// masked by causality or the window keep a weight e^-1 relative to an unmasked logit of 0,
// in the kernel as in the reference. A kernel that substituted the mask value, or dropped
// masked keys, would fail here and nowhere else.
TEST(TiledKernelMaskValue, SmallMaskValueIsAddedOnWholeKvBlocks) {
  Params p;
  p.mask_value = -1.0;
  // Every kv_len is a multiple of the KV block (bkv x S = 4 or 8 tokens).
  const std::vector<SeqLens> seqs = {{1, 16}, {8, 8}, {5, 24}, {0, 8}, {16, 16}};
  for (const DTypes dt : {DTypes{F32, F32}, DTypes{BF16, BF16}}) {
    const Inputs in = testing::random_inputs(spec_of(seqs, dt));
    const PagedKvView view = kv_view(in);
    for (const std::optional<int64_t> window :
         {std::optional<int64_t>{}, std::optional<int64_t>{1}, std::optional<int64_t>{5}}) {
      p.sliding_window = window;
      for (const int64_t bkv : {1, 2}) {
        for (const int64_t bq : {3, 32}) {
          const Params pb = with_blocks(p, bkv, bq);
          SCOPED_TRACE(describe(in, pb));
          const auto f = validate(in, pb);
          ASSERT_TRUE(f.has_value());
          EXPECT_EQ(f->rule, RuleId::mask_value_too_large) << f->message;
          const ReferenceResult ref = dense_reference(in, pb);
          const Tensor one = tiled_attention(in, pb, KernelOptions{.threads = 1});
          EXPECT_TRUE(one == tiled_attention(in, pb, KernelOptions{.threads = 2}));
          const Comparison c = compare_outputs(
              one, ref.out, view, tolerance_for_case(in, pb, ref));
          EXPECT_TRUE(c.agree()) << describe_mismatch(c);
        }
      }
    }
  }
}

// The reason for the rule, minimal: one sequence, q_len = kv_len = 1, page size 2, one page
// per KV block, q = k = 0, v = 1. The reference gives 1 (one key); the kernel, as on the
// TPU, also weighs the empty slot 1 (logit 0 + mask_value = -1, V zero-filled): 1 / (1 +
// e^-1). With the default mask value that weight underflows and both give 1.
TEST(TiledKernelMaskValue, SmallMaskValueWeighsPaddedSlotsAsOnTheTpu) {
  testing::InputsSpec s = testing::one_page_spec({1, 1}, 2);
  s.num_q_heads = 1;
  s.num_kv_heads = 1;
  Inputs in = testing::build_inputs(s);
  in.q.set_float(0, 0.0);         // q of row 0
  in.kv_pages.set_float(0, 0.0);  // K of token 0
  in.kv_pages.set_float(1, 1.0);  // V of token 0
  Params p = with_blocks({}, 1, 1);
  EXPECT_EQ(expect_kernel_agrees(in, p).float_at(0), 1.0);
  p.mask_value = -1e30;  // the largest strict-valid mask value (mask_value_too_large)
  EXPECT_EQ(expect_kernel_agrees(in, p).float_at(0), 1.0);
  p.mask_value = -1.0;
  const auto f = validate(in, p);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->rule, RuleId::mask_value_too_large) << f->message;
  EXPECT_EQ(dense_reference(in, p).out.float_at(0), 1.0);
  const float tpu = 1.0f / (1.0f + std::exp(-1.0f));
  EXPECT_NEAR(tiled_attention(in, p, KernelOptions{.threads = 1}).float_at(0), tpu, 1e-6);
}

// A zero-filled slot (past kv_len) has K = 0, and its logit is q . 0: NaN where q holds an
// infinity, as the TPU's dot over the zeroed slot gives (not 0). One decode row over kv_len 1
// in a page of 2 slots: q = +inf and K of token 0 = -1 give the real logit -inf; the literal
// schedule's zero-filled slot then makes the row's maximum NaN, and the output NaN. Were
// that slot's logit 0, the row's maximum would be mask_value and its output finite.
TEST(TiledKernelLiteral, InfiniteQueryMakesZeroFilledSlotsNaN) {
  testing::InputsSpec s = testing::one_page_spec({1, 1}, 2);
  s.num_q_heads = 1;
  s.num_kv_heads = 1;
  Inputs in = testing::build_inputs(s);
  in.q.set_float(0, std::numeric_limits<double>::infinity());
  in.kv_pages.set_float(0, -1.0);  // K of token 0
  in.kv_pages.set_float(1, 1.0);   // V of token 0
  const Params p = with_blocks({}, 1, 1);
  ASSERT_FALSE(validate(in, p).has_value());
  const Tensor literal = tiled_attention(in, p, KernelOptions{.literal_schedule = true});
  EXPECT_TRUE(std::isnan(literal.float_at(0))) << literal.float_at(0);
}

// ---- mask_value -inf: NaN on the TPU, the definition in the default schedule ------------

// One prefill of 64 tokens, page size 4, KV blocks of 2 pages (8 tokens), sliding window
// 4: the row at position q_pos >= 11 masks every key t <= q_pos - 4, so its whole first KV
// block (t < 8). With mask_value -inf the Pallas program's online softmax (the literal
// schedule) computes m = max(-inf, ...) = -inf and exp(-inf - -inf) = NaN in its first step,
// which no later block undoes: why strict mode rejects the mask value. The default schedule
// computes the definition: a block of -inf logits weighs nothing.
Inputs first_block_masked_prefill() {
  return testing::random_inputs(spec_of({{64, 64}}, {F32, F32}, 4, 2, 8, 4, 3));
}

Params first_block_masked_params() {
  Params p = with_blocks({}, 2, 16);
  p.sliding_window = 4;
  return p;
}

TEST(TiledKernelMaskValue, NegativeInfinityGivesNaNOnMultiBlockPrefillInThePallasProgram) {
  const Inputs in = first_block_masked_prefill();
  Params p = first_block_masked_params();
  p.mask_value = -INFINITY;
  // Strict validation rejects a mask value of -inf (exactly because of this NaN), so this
  // test calls the kernel without validating; everything else it needs holds.
  const auto f = validate(in, p);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->rule, RuleId::mask_value_nonfinite) << f->message;
  ASSERT_FALSE(validate(in, first_block_masked_params()).has_value());

  const PagedKvView view = kv_view(in);
  // The reference's softmax sees each row whole and has no NaN.
  const ReferenceResult ref = dense_reference(in, p);
  EXPECT_EQ(count_nan_on_defined_rows(ref.out, view), 0);
  const int64_t row_elems = view.num_q_heads() * view.head_dim();
  const Tensor literal = tiled_attention(in, p, KernelOptions{.literal_schedule = true});
  for (int64_t r = 0; r < 64; ++r) {
    if (view.q_position(0, r) < 11) continue;
    int64_t nan = 0;
    for (int64_t e = 0; e < row_elems; ++e) nan += std::isnan(literal.float_at(r * row_elems + e));
    EXPECT_EQ(nan, row_elems) << "row " << r << " (position " << view.q_position(0, r)
                              << ") should be NaN: its first KV block is fully masked";
  }
  for (const int threads : {1, 2}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    const Tensor o = tiled_attention(in, p, KernelOptions{.threads = threads});
    EXPECT_EQ(count_nan_on_defined_rows(o, view), 0);
    EXPECT_TRUE(compare_outputs(o, ref.out, view, tolerance_for_case(in, p, ref)).agree());
    expect_rows_past_total_zero(o, view, "mask -inf");
  }
}

// The same case with the default mask value: no NaN, and agreement with the reference.
TEST(TiledKernelMaskValue, DefaultMaskValueOnTheSameCaseAgrees) {
  const Inputs in = first_block_masked_prefill();
  const Params p = first_block_masked_params();
  const Tensor o = expect_kernel_agrees(in, p);
  ASSERT_FALSE(o.shape().empty());
  EXPECT_EQ(count_nan_on_defined_rows(o, kv_view(in)), 0);
}

// ---- Heads blocks and threads -------------------------------------------------------------

struct HeadsCase {
  DTypes dt;
  int64_t num_q_heads, num_kv_heads, expected_heads_blks;
};

// Combined kv heads beyond one (8 x packing)-row tile split into several heads blocks:
// 32 q heads over 16 kv heads in float32 give 4 blocks of 8 q heads, and so on.
TEST(TiledKernelHeads, SeveralHeadsBlocksAgree) {
  const std::vector<HeadsCase> cases = {{{F32, F32}, 32, 16, 4},
                                        {{F32, F32}, 8, 8, 2},
                                        {{BF16, BF16}, 32, 16, 2},
                                        {{BF16, E4M3}, 64, 32, 2},
                                        {{F32, E5M2}, 32, 32, 2}};
  for (const HeadsCase& hc : cases) {
    const Inputs in = testing::random_inputs(
        spec_of({{1, 9}, {5, 13}, {0, 2}, {3, 3}}, hc.dt, hc.num_q_heads, hc.num_kv_heads, 8));
    Params p = with_blocks({}, 2, 4);
    p.sliding_window = 6;
    const KernelPlan plan = plan_kernel(in, p, default_target_profile());
    SCOPED_TRACE(describe(in, p));
    EXPECT_GT(plan.num_heads_blks, 1);
    EXPECT_EQ(plan.num_heads_blks, hc.expected_heads_blks);
    EXPECT_GT(plan.num_q_blks, 1);
    expect_kernel_agrees(in, p);
    expect_kernel_agrees(in, Params{});
  }
}

// Each task (a sequence's row tile, its heads, a KV chunk) is computed by one thread in a
// fixed order: any thread count, more threads than tasks and "every core" included, gives
// the same bits. (A TPU grid of more than 8 cells makes a case of many small tasks.)
TEST(TiledKernelThreads, OutputBitsDoNotDependOnThreads) {
  const Inputs in =
      testing::random_inputs(spec_of({{1, 9}, {5, 13}, {7, 30}, {3, 3}}, {F32, F32}, 32, 16, 8));
  const Params p = with_blocks({}, 2, 3);
  const KernelPlan plan = plan_kernel(in, p, default_target_profile());
  ASSERT_GT(plan.num_heads_blks * plan.num_q_blks, 8);
  const Tensor want = expect_kernel_agrees(in, p);
  for (const int threads : {0, 3, 8, 1000}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    EXPECT_TRUE(tiled_attention(in, p, KernelOptions{.threads = threads}) == want);
  }
}

// The default schedule cuts a decode sequence's long KV range into chunks of whole KV blocks
// of at least 1024 tokens (flash-decoding), computed as separate tasks and merged in order,
// and a tall sequence into tiles of 512 rows (query rows x q heads per kv head). Both follow from the
// shape only: the bits are the same on any thread count, and they agree with the
// reference. Blocks of 4 pages of 16 (64 tokens) make 16 blocks a chunk: kv_len 2500 is 3
// chunks, 1500 is 2, with decode rows, a chunked prefill row block and a window.
TEST(TiledKernelSplit, ChunksAndTilesAgreeOnAnyThreadCount) {
  const Inputs decode = testing::random_inputs(
      spec_of({{1, 2500}, {3, 1500}, {1, 70}}, {BF16, BF16}, 8, 2, 32, 16, 7));
  const Inputs tall = testing::random_inputs(spec_of({{700, 900}, {2, 1100}}, {F32, E4M3}, 2, 2, 16, 16, 8));
  // Decode rows whose KV block (8 pages of 16 tokens of 8 KiB: 1 MiB) takes two of decode's
  // 512 KiB online-softmax steps, with a window edge inside a block.
  const Inputs wide = testing::random_inputs(spec_of({{1, 700}, {2, 300}}, {F32, F32}, 32, 8, 128, 16, 9));
  Params wide_window = with_blocks({}, 8, 16);
  wide_window.sliding_window = 200;
  Params window = with_blocks({}, 4, 16);
  window.sliding_window = 1300;
  window.soft_cap = 30.0;
  for (const auto& [in, p] : {std::pair<const Inputs&, Params>{decode, with_blocks({}, 4, 16)},
                              {decode, window},
                              {tall, with_blocks({}, 4, 64)},
                              {tall, Params{}},
                              {wide, with_blocks({}, 8, 16)},
                              {wide, wide_window}}) {
    SCOPED_TRACE(describe(in, p));
    const Tensor want = expect_kernel_agrees(in, p);
    for (const int threads : {3, 7}) {
      EXPECT_TRUE(tiled_attention(in, p, KernelOptions{.threads = threads}) == want)
          << threads << " threads";
    }
  }
}

// The same call, repeated, gives the same bits wherever the kernel's scratch buffers land
// on the heap: the allocations held between the calls shift the addresses malloc hands out
// by multiples of 16 bytes. (A summation order that follows a buffer's alignment, e.g. a
// vectorized dot product that peels to a 32-byte boundary, fails this.) One decode row
// over one KV block of 8 tokens, and a mixed batch.
TEST(TiledKernelThreads, RepeatedCallsGiveSameBits) {
  for (const std::vector<SeqLens>& seqs :
       {std::vector<SeqLens>{{1, 8}}, std::vector<SeqLens>{{1, 13}, {7, 7}, {17, 18}, {12, 20}}}) {
    const Inputs in = testing::random_inputs(spec_of(seqs, {F32, F32}, 1, 1, 8));
    const Params p = with_blocks({}, 2, 8);
    SCOPED_TRACE(describe(in, p));
    expect_valid(in, p);
    const Tensor first = tiled_attention(in, p, KernelOptions{.threads = 1});
    std::vector<std::vector<char>> held;
    int64_t differ = 0;
    for (size_t i = 0; i < 32; ++i) {
      // Take every small chunk malloc keeps cached, so the kernel's buffers come from new
      // addresses, after an odd number of 16-byte units every other call.
      for (size_t bytes = 8; bytes <= 2048; bytes += 16) held.emplace_back(bytes);
      held.emplace_back(8 + 16 * (i % 2));
      differ += tiled_attention(in, p, KernelOptions{.threads = 1}) == first ? 0 : 1;
    }
    EXPECT_EQ(differ, 0) << "of 32 repeated calls";
  }
}

// ---- What the definition never reads -------------------------------------------------------

// Rows of q past the sequences hold NaN (random_inputs); a query block straddles the end of
// the last sequence. The kernel leaves those output rows 0, and sequence slots past
// num_seqs (garbage kv_lens and page_indices) are never touched.
TEST(TiledKernelGarbage, RowsPastTheSequencesAreZero) {
  RandomInputsSpec spec = spec_of({{3, 7}, {1, 12}});
  spec.extra_tokens = 23;
  spec.extra_seq_slots = 3;
  const Inputs in = testing::random_inputs(spec);
  ASSERT_TRUE(std::isnan(in.q.float_at(in.q.numel() - 1)));
  for (const int64_t bq : {1, 3, 7, 32}) expect_kernel_agrees(in, with_blocks({}, 2, bq));
}

// Different garbage in every page slot past kv_len, every page the sequences do not use,
// and every page_indices entry past a sequence's last page (int32 extremes instead of
// random_inputs's -1000 - j): the kernel's output keeps its bits, with KV blocks of 1 page
// and of pages_per_seq + 1 pages (whose page slots past the end the kernel clamps).
TEST(TiledKernelGarbage, UnreadPagesAndIndicesDoNotMatter) {
  const Inputs a = testing::random_inputs(spec_of({{2, 5}, {0, 6}, {9, 9}, {1, 14}}));
  const PagedKvView view = kv_view(a);
  Inputs b = a;
  std::vector<bool> read(static_cast<size_t>(a.kv_pages.numel()), false);
  for (int64_t s = 0; s < view.num_seqs(); ++s) {
    for (int64_t t = 0; t < view.kv_len(s); ++t) {
      for (int64_t e = 0; e < 2 * view.num_kv_heads() * view.head_dim(); ++e) {
        read[static_cast<size_t>(view.k_offset(s, t, 0) + e)] = true;
      }
    }
  }
  for (int64_t i = 0; i < b.kv_pages.numel(); ++i) {
    if (!read[static_cast<size_t>(i)]) b.kv_pages.set_float(i, i % 2 ? 1e30 : -INFINITY);
  }
  const int64_t pps = view.pages_per_seq();
  for (int64_t s = 0; s < view.num_seqs(); ++s) {
    const int64_t used =
        std::max<int64_t>(1, (view.kv_len(s) + view.page_size() - 1) / view.page_size());
    for (int64_t j = used; j < pps; ++j) {
      b.page_indices.set_int(s * pps + j, j % 2 ? std::numeric_limits<int32_t>::min()
                                                : std::numeric_limits<int32_t>::max());
    }
  }
  for (const int64_t bkv : {int64_t{1}, pps + 1}) {
    const Params p = with_blocks({}, bkv, 4);
    SCOPED_TRACE("bkv " + std::to_string(bkv));
    const Tensor oa = expect_kernel_agrees(a, p);
    const Tensor ob = expect_kernel_agrees(b, p);
    EXPECT_TRUE(oa == ob);
  }
}

}  // namespace
}  // namespace rpa
