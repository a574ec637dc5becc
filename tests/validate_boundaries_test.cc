// Every validation rule at its boundary, on both sides, in both modes, with the exact
// message. The expected verdicts and messages are written by hand from JAX's kernel.py
// (jax mode) and DESIGN.md section 3 (strict mode), never computed by the validator.
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <ostream>
#include <string>

#include <gtest/gtest.h>

#include "tests/inputs_builder.h"
#include "validation/jax_validate.h"

namespace rpa {
namespace {

using testing::InputsSpec;
using testing::zeros;

struct Expect {
  std::optional<RuleId> rule;  // nullopt: accepted
  std::string message;
};

const Expect kValid{};
Expect rejects(RuleId id, std::string message) { return Expect{id, std::move(message)}; }

struct BoundaryCase {
  std::string name;
  std::function<void(InputsSpec&)> spec;              // applied before building
  std::function<void(Inputs&, Params&)> mutate;       // applied after
  Expect jax;
  Expect strict;
  TargetProfile target = default_target_profile();
};

// gtest prints parameters in test listings; the name says it all.
void PrintTo(const BoundaryCase& c, std::ostream* os) { *os << c.name; }

// The base case is valid in both modes: three sequences (q_len, kv_len) = (1, 5), (3, 7),
// (2, 2) in 4 slots of 4 pages of 4 tokens, 4 query heads over 2 kv heads, head_dim 128
// (the Pallas kernel traces only multiples of 128: head_dim_not_lane_multiple).
InputsSpec base_spec() {
  InputsSpec s;
  s.seqs = {{1, 5}, {3, 7}, {2, 2}};
  s.head_dim = 128;
  return s;
}

void set_ints(Tensor& t, std::initializer_list<int64_t> values) {
  int64_t i = 0;
  for (int64_t v : values) t.set_int(i++, v);
}

void huge_pages_spec(InputsSpec& s) {
  s.seqs = {{1, 1}};
  s.num_q_heads = 1;
  s.num_kv_heads = 1;
  s.head_dim = 1;
  s.page_size = 1 << 20;
  s.pages_per_seq = 2048;
  s.max_num_seqs = 1;
  s.max_num_batched_tokens = 1;
  s.total_num_pages = 1;
}

void huge_pages_blocks(Inputs& in, Params& p) {
  for (int64_t j = 0; j < 2048; ++j) in.page_indices.set_int(j, 0);
  p.num_kv_pages_per_block = 1;
  p.num_queries_per_block = 1;
}

class ValidateBoundary : public ::testing::TestWithParam<BoundaryCase> {
 protected:
  void check(Mode mode, const Expect& expect) {
    const BoundaryCase& c = GetParam();
    InputsSpec spec = base_spec();
    if (c.spec) c.spec(spec);
    Inputs in = testing::build_inputs(spec);
    Params params;
    if (c.mutate) c.mutate(in, params);
    const auto got = validate(in, params, ValidateOptions{.mode = mode, .target = c.target});
    if (!expect.rule) {
      EXPECT_FALSE(got.has_value()) << "rejected by " << rule_info(got->rule).name << ": "
                                    << got->message;
      return;
    }
    ASSERT_TRUE(got.has_value()) << "accepted; expected " << rule_info(*expect.rule).name;
    EXPECT_EQ(rule_info(got->rule).name, rule_info(*expect.rule).name);
    EXPECT_EQ(got->message, expect.message);
  }
};

TEST_P(ValidateBoundary, Jax) { check(Mode::kJax, GetParam().jax); }
TEST_P(ValidateBoundary, Strict) { check(Mode::kStrict, GetParam().strict); }

const auto kCases = ::testing::Values(
    BoundaryCase{"base", {}, {}, kValid, kValid},
    // --- shapes -------------------------------------------------------------------------
    BoundaryCase{"q_rank_4", {}, [](Inputs& in, Params&) { in.q = zeros(DType::kFloat32, {16, 4, 8, 1}); },
                 rejects(RuleId::q_rank, "q.shape=(16, 4, 8, 1) must have rank 3: "
                                         "[max_num_batched_tokens, num_q_heads, head_dim]."),
                 rejects(RuleId::q_rank, "q.shape=(16, 4, 8, 1) must have rank 3: "
                                         "[max_num_batched_tokens, num_q_heads, head_dim].")},
    BoundaryCase{"kv_pages_rank_3", {}, [](Inputs& in, Params&) { in.kv_pages = zeros(DType::kFloat32, {16, 4, 32}); },
                 rejects(RuleId::kv_pages_rank, "kv_pages.shape=(16, 4, 32) must have rank 4: "
                         "[total_num_pages, page_size, num_combined_kv_heads, head_dim]."),
                 rejects(RuleId::kv_pages_rank, "kv_pages.shape=(16, 4, 32) must have rank 4: "
                         "[total_num_pages, page_size, num_combined_kv_heads, head_dim].")},
    BoundaryCase{"combined_heads_2", [](InputsSpec& s) { s.num_kv_heads = 1; }, {}, kValid, kValid},
    BoundaryCase{"combined_heads_3", {}, [](Inputs& in, Params&) { in.kv_pages = zeros(DType::kFloat32, {16, 4, 3, 8}); },
                 rejects(RuleId::combined_heads_odd, "num_combined_kv_heads=3 must be even."),
                 rejects(RuleId::combined_heads_odd, "num_combined_kv_heads=3 must be even.")},
    BoundaryCase{"page_indices_rank_1", {}, [](Inputs& in, Params&) { in.page_indices = zeros(DType::kInt32, {16}); },
                 rejects(RuleId::page_indices_rank, "page_indices.shape=(16,) must have rank 2: [max_num_seqs, pages_per_seq]."),
                 rejects(RuleId::page_indices_rank, "page_indices.shape=(16,) must have rank 2: [max_num_seqs, pages_per_seq].")},
    BoundaryCase{"num_seqs_shape_2", {}, [](Inputs& in, Params&) { in.num_seqs = zeros(DType::kInt32, {2}); },
                 rejects(RuleId::num_seqs_shape, "num_seqs.shape=(2,) must be (1,)"),
                 rejects(RuleId::num_seqs_shape, "num_seqs.shape=(2,) must be (1,)")},
    BoundaryCase{"num_seqs_shape_scalar", {}, [](Inputs& in, Params&) { in.num_seqs = zeros(DType::kInt32, {}); },
                 rejects(RuleId::num_seqs_shape, "num_seqs.shape=() must be (1,)"),
                 rejects(RuleId::num_seqs_shape, "num_seqs.shape=() must be (1,)")},
    BoundaryCase{"head_dim_mismatch", {}, [](Inputs& in, Params&) { in.kv_pages = zeros(DType::kFloat32, {16, 4, 4, 16}); },
                 rejects(RuleId::head_dim_mismatch, "Q head_dim 128 must be the same as that of K/V 16."),
                 rejects(RuleId::head_dim_mismatch, "Q head_dim 128 must be the same as that of K/V 16.")},
    BoundaryCase{"kv_lens_shape_5", {}, [](Inputs& in, Params&) { in.kv_lens = zeros(DType::kInt32, {5}); },
                 rejects(RuleId::kv_lens_shape, "Expected kv_lens.shape=(5,) to be (4,) where `max_num_seqs` is `page_indices.shape[0]`."),
                 rejects(RuleId::kv_lens_shape, "Expected kv_lens.shape=(5,) to be (4,) where `max_num_seqs` is `page_indices.shape[0]`.")},
    BoundaryCase{"cu_q_lens_shape_4", {}, [](Inputs& in, Params&) { in.cu_q_lens = zeros(DType::kInt32, {4}); },
                 rejects(RuleId::cu_q_lens_shape, "Expected cu_q_lens.shape=(4,) to be (5,)  where `max_num_seqs` is `page_indices.shape[0]`."),
                 rejects(RuleId::cu_q_lens_shape, "Expected cu_q_lens.shape=(4,) to be (5,)  where `max_num_seqs` is `page_indices.shape[0]`.")},
    BoundaryCase{"index_dtype_int64", {}, [](Inputs& in, Params&) { in.page_indices = zeros(DType::kInt64, {4, 4}); },
                 rejects(RuleId::index_dtype, "The dtype of `kv_lens`, `page_indices`, and `cu_q_lens` must be int32. Got kv_lens.dtype=dtype('int32'), page_indices.dtype=dtype('int64'), cu_q_lens.dtype=dtype('int32')."),
                 rejects(RuleId::index_dtype, "The dtype of `kv_lens`, `page_indices`, and `cu_q_lens` must be int32. Got kv_lens.dtype=dtype('int32'), page_indices.dtype=dtype('int64'), cu_q_lens.dtype=dtype('int32').")},
    BoundaryCase{"num_seqs_int64", {}, [](Inputs& in, Params&) { in.num_seqs = zeros(DType::kInt64, {1}); in.num_seqs.set_int(0, 3); },
                 kValid, rejects(RuleId::num_seqs_dtype, "num_seqs.dtype=dtype('int64') must be int32.")},
    BoundaryCase{"num_seqs_float32", {}, [](Inputs& in, Params&) { in.num_seqs = zeros(DType::kFloat32, {1}); },
                 rejects(RuleId::num_seqs_dtype, "num_seqs.dtype=dtype('float32') must be int32."),
                 rejects(RuleId::num_seqs_dtype, "num_seqs.dtype=dtype('float32') must be int32.")},
    // JAX carries a float or bool num_seqs through every check up to cu_q_lens[num_seqs[0]].
    BoundaryCase{"num_seqs_float_then_window", {}, [](Inputs& in, Params& p) { in.num_seqs = zeros(DType::kFloat32, {1}); p.sliding_window = 0; },
                 rejects(RuleId::sliding_window_nonpositive, "sliding_window=0 must be positive."),
                 rejects(RuleId::num_seqs_dtype, "num_seqs.dtype=dtype('float32') must be int32.")},
    BoundaryCase{"num_seqs_float_too_large", {}, [](Inputs& in, Params&) { in.num_seqs = zeros(DType::kFloat32, {1}); in.num_seqs.set_float(0, 4.1); },
                 rejects(RuleId::num_seqs_too_large, "num_seqs[0]=4.1 must be less or equal to max_num_seqs=4"),
                 rejects(RuleId::num_seqs_dtype, "num_seqs.dtype=dtype('float32') must be int32.")},
    BoundaryCase{"num_seqs_bool", {}, [](Inputs& in, Params&) { in.num_seqs = zeros(DType::kBool, {1}); in.num_seqs.set_int(0, 1); },
                 rejects(RuleId::num_seqs_dtype, "num_seqs.dtype=dtype('bool') must be int32."),
                 rejects(RuleId::num_seqs_dtype, "num_seqs.dtype=dtype('bool') must be int32.")},
    // --- dtypes -------------------------------------------------------------------------
    // jax mode: JAX's validators accept them; the Pallas kernel asserts float32 / bfloat16.
    BoundaryCase{"q_uint16", [](InputsSpec& s) { s.q_dtype = DType::kUInt16; }, {},
                 rejects(RuleId::q_dtype_unsupported, "q.dtype=dtype('uint16') must be float32 or bfloat16 for the Pallas kernel (fold_on_2nd_minor asserts it)."),
                 rejects(RuleId::q_dtype_unsupported, "q.dtype=dtype('uint16') must be float32 or bfloat16.")},
    BoundaryCase{"q_float16", [](InputsSpec& s) { s.q_dtype = DType::kFloat16; s.kv_dtype = DType::kFloat16; }, {},
                 rejects(RuleId::q_dtype_unsupported, "q.dtype=dtype('float16') must be float32 or bfloat16 for the Pallas kernel (fold_on_2nd_minor asserts it)."),
                 rejects(RuleId::q_dtype_unsupported, "q.dtype=dtype('float16') must be float32 or bfloat16.")},
    BoundaryCase{"kv_float64", [](InputsSpec& s) { s.kv_dtype = DType::kFloat64; }, {},
                 rejects(RuleId::dtype_packing_zero, "get_dtype_packing(dtype('float64')) is 0: can_be_xla_fully_tiled raises ZeroDivisionError."),
                 rejects(RuleId::kv_dtype_unsupported, "kv_pages.dtype=dtype('float64') must be float32, bfloat16, float8_e4m3fn or float8_e5m2.")},
    BoundaryCase{"q_bf16_kv_f32", [](InputsSpec& s) { s.q_dtype = DType::kBFloat16; }, {},
                 kValid, rejects(RuleId::dtype_mismatch, "q.dtype=dtype(bfloat16) and kv_pages.dtype=dtype('float32') must be equal unless kv_pages is float8.")},
    BoundaryCase{"q_bf16_kv_e4m3fn", [](InputsSpec& s) { s.q_dtype = DType::kBFloat16; s.kv_dtype = DType::kFloat8E4M3FN; }, {},
                 kValid, kValid},
    // --- heads --------------------------------------------------------------------------
    BoundaryCase{"kv_heads_0", {}, [](Inputs& in, Params&) { in.kv_pages = zeros(DType::kFloat32, {16, 4, 0, 128}); },
                 rejects(RuleId::kv_heads_zero, "num_kv_heads=0 must be positive."),
                 rejects(RuleId::kv_heads_zero, "num_kv_heads=0 must be positive.")},
    BoundaryCase{"q_heads_3_over_2", [](InputsSpec& s) { s.num_q_heads = 3; }, {},
                 rejects(RuleId::heads_not_divisible, "num_q_heads=3 must be divisible by num_kv_heads=2"),
                 rejects(RuleId::heads_not_divisible, "num_q_heads=3 must be divisible by num_kv_heads=2")},
    // jax mode: JAX's validators accept these; the Pallas kernel raises when tracing them.
    BoundaryCase{"q_heads_0", [](InputsSpec& s) { s.num_q_heads = 0; }, {},
                 rejects(RuleId::q_heads_zero, "num_q_heads=0 must be positive (the Pallas kernel divides by its heads per block)."),
                 rejects(RuleId::q_heads_zero, "num_q_heads=0 must be positive.")},
    BoundaryCase{"head_dim_0", [](InputsSpec& s) { s.head_dim = 0; }, {},
                 rejects(RuleId::head_dim_not_lane_multiple, "head_dim=0 must be a positive multiple of 128 for the Pallas kernel (broadcast_to_shape asserts head_dim % 128 == 0)."),
                 rejects(RuleId::head_dim_zero, "head_dim=0 must be positive.")},
    BoundaryCase{"head_dim_1", [](InputsSpec& s) { s.head_dim = 1; }, {},
                 rejects(RuleId::head_dim_not_lane_multiple, "head_dim=1 must be a positive multiple of 128 for the Pallas kernel (broadcast_to_shape asserts head_dim % 128 == 0)."),
                 kValid},
    BoundaryCase{"head_dim_127", [](InputsSpec& s) { s.head_dim = 127; }, {},
                 rejects(RuleId::head_dim_not_lane_multiple, "head_dim=127 must be a positive multiple of 128 for the Pallas kernel (broadcast_to_shape asserts head_dim % 128 == 0)."),
                 kValid},
    BoundaryCase{"head_dim_256", [](InputsSpec& s) { s.head_dim = 256; }, {}, kValid, kValid},
    BoundaryCase{"kv_heads_3_not_tileable", [](InputsSpec& s) { s.num_kv_heads = 3; s.num_q_heads = 6; }, {},
                 rejects(RuleId::heads_not_tileable, "Not implemented: num_combined_kv_heads=6 can not be XLA fully tiled."),
                 rejects(RuleId::heads_not_tileable, "Not implemented: num_combined_kv_heads=6 can not be XLA fully tiled.")},
    // JAX checks the KV tiling before it divides by q's packing (0 for a 64-bit q).
    BoundaryCase{"q_float64_kv_heads_3", [](InputsSpec& s) { s.q_dtype = DType::kFloat64; s.num_kv_heads = 3; s.num_q_heads = 6; }, {},
                 rejects(RuleId::heads_not_tileable, "Not implemented: num_combined_kv_heads=6 can not be XLA fully tiled."),
                 rejects(RuleId::q_dtype_unsupported, "q.dtype=dtype('float64') must be float32 or bfloat16.")},
    BoundaryCase{"q_float64", [](InputsSpec& s) { s.q_dtype = DType::kFloat64; }, {},
                 rejects(RuleId::dtype_packing_zero, "get_dtype_packing(dtype('float64')) is 0: can_be_xla_fully_tiled raises ZeroDivisionError."),
                 rejects(RuleId::q_dtype_unsupported, "q.dtype=dtype('float64') must be float32 or bfloat16.")},
    BoundaryCase{"mqa_fp8_not_tileable", [](InputsSpec& s) { s.num_kv_heads = 1; s.q_dtype = DType::kBFloat16; s.kv_dtype = DType::kFloat8E5M2; }, {},
                 rejects(RuleId::heads_not_tileable, "Not implemented: num_combined_kv_heads=2 can not be XLA fully tiled."),
                 rejects(RuleId::heads_not_tileable, "Not implemented: num_combined_kv_heads=2 can not be XLA fully tiled.")},
    // --- parameters ---------------------------------------------------------------------
    BoundaryCase{"sliding_window_1", {}, [](Inputs&, Params& p) { p.sliding_window = 1; }, kValid, kValid},
    BoundaryCase{"sliding_window_0", {}, [](Inputs&, Params& p) { p.sliding_window = 0; },
                 rejects(RuleId::sliding_window_nonpositive, "sliding_window=0 must be positive."),
                 rejects(RuleId::sliding_window_nonpositive, "sliding_window=0 must be positive.")},
    BoundaryCase{"sliding_window_neg1", {}, [](Inputs&, Params& p) { p.sliding_window = -1; },
                 rejects(RuleId::sliding_window_nonpositive, "sliding_window=-1 must be positive."),
                 rejects(RuleId::sliding_window_nonpositive, "sliding_window=-1 must be positive.")},
    BoundaryCase{"soft_cap_0", {}, [](Inputs&, Params& p) { p.soft_cap = 0.0; },
                 rejects(RuleId::soft_cap_zero, "soft_cap=0.0 must not be 0.0."),
                 rejects(RuleId::soft_cap_zero, "soft_cap=0.0 must not be 0.0.")},
    BoundaryCase{"soft_cap_neg0", {}, [](Inputs&, Params& p) { p.soft_cap = -0.0; },
                 rejects(RuleId::soft_cap_zero, "soft_cap=-0.0 must not be 0.0."),
                 rejects(RuleId::soft_cap_zero, "soft_cap=-0.0 must not be 0.0.")},
    BoundaryCase{"soft_cap_min_subnormal", {}, [](Inputs&, Params& p) { p.soft_cap = 5e-324; },
                 kValid, rejects(RuleId::soft_cap_zero, "soft_cap=5e-324 must not be 0.0 (it is 0.0 as a float32).")},
    // The kernel runs with subnormals flushed, as TPUs do: a float32-subnormal cap is 0 there.
    BoundaryCase{"soft_cap_min_float32_subnormal", {}, [](Inputs&, Params& p) { p.soft_cap = 1e-45; },
                 kValid, rejects(RuleId::soft_cap_zero, "soft_cap=1e-45 must not be 0.0 (it is subnormal as a float32).")},
    BoundaryCase{"soft_cap_min_float32_normal", {}, [](Inputs&, Params& p) { p.soft_cap = 0x1p-126; }, kValid, kValid},
    BoundaryCase{"sm_scale_past_float32", {}, [](Inputs&, Params& p) { p.sm_scale = 1e39; },
                 kValid, rejects(RuleId::sm_scale_nonfinite, "sm_scale=1e+39 must be finite as a float32.")},
    BoundaryCase{"k_scale_past_float32", {}, [](Inputs&, Params& p) { p.k_scale = -1e39; },
                 kValid, rejects(RuleId::k_scale_nonfinite, "k_scale=-1e+39 must be finite as a float32.")},
    // numpy prints float32's max as 3.4028235e+38, a hair above FLT_MAX in double: it rounds
    // to FLT_MAX, so it is finite.
    BoundaryCase{"mask_value_numpy_float32_min", {}, [](Inputs&, Params& p) { p.mask_value = -3.4028235e38; }, kValid, kValid},
    BoundaryCase{"sliding_window_int32_max", {}, [](Inputs&, Params& p) { p.sliding_window = 2147483647; }, kValid, kValid},
    BoundaryCase{"sliding_window_past_int32", {}, [](Inputs&, Params& p) { p.sliding_window = 2147483648; },
                 rejects(RuleId::sliding_window_too_large, "sliding_window=2147483648 must fit in int32."),
                 rejects(RuleId::sliding_window_too_large, "sliding_window=2147483648 must fit in int32.")},
    // VMEM by hand (DESIGN.md section 4; float32, 4 q heads and 4 combined heads a block,
    // D 128): KV 2 x 1 x 4 x pad8(4) x 128 x 4 = 32768; l and m 2 x 2 x pad8(2 bq) x 128 x 4;
    // acc bq x pad8(4) x 128 x 4; q and o 4 x bq x pad8(4) x 128 x 4. bq = 2^31 - 1: 32768 +
    // 8796093022208 + 8796093018112 + 35184372072448; bq = 2^31: 32768 + 8796093022208 +
    // 8796093022208 + 35184372088832.
    BoundaryCase{"q_block_int32_max", {}, [](Inputs&, Params& p) { p.num_kv_pages_per_block = 1; p.num_queries_per_block = 2147483647; },
                 kValid,
                 rejects(RuleId::vmem_budget_exceeded, "num_kv_pages_per_block=1 and num_queries_per_block=2147483647 need 52776558145536 bytes of VMEM, more than the default scoped limit of 33554432 bytes.")},
    BoundaryCase{"q_block_past_int32", {}, [](Inputs&, Params& p) { p.num_kv_pages_per_block = 1; p.num_queries_per_block = 2147483648; },
                 rejects(RuleId::queries_per_block_too_large, "num_queries_per_block=2147483648 must fit in int32."),
                 rejects(RuleId::vmem_budget_exceeded, "num_kv_pages_per_block=1 and num_queries_per_block=2147483648 need 52776558166016 bytes of VMEM, more than the default scoped limit of 33554432 bytes.")},
    BoundaryCase{"soft_cap_50", {}, [](Inputs&, Params& p) { p.soft_cap = 50.0; }, kValid, kValid},
    BoundaryCase{"soft_cap_nan", {}, [](Inputs&, Params& p) { p.soft_cap = std::nan(""); },
                 kValid, rejects(RuleId::soft_cap_nonfinite, "soft_cap=nan must be finite as a float32.")},
    BoundaryCase{"soft_cap_inf", {}, [](Inputs&, Params& p) { p.soft_cap = INFINITY; },
                 kValid, rejects(RuleId::soft_cap_nonfinite, "soft_cap=inf must be finite as a float32.")},
    BoundaryCase{"sm_scale_tiny", {}, [](Inputs&, Params& p) { p.sm_scale = 1e-05; }, kValid, kValid},
    BoundaryCase{"sm_scale_neg_inf", {}, [](Inputs&, Params& p) { p.sm_scale = -INFINITY; },
                 kValid, rejects(RuleId::sm_scale_nonfinite, "sm_scale=-inf must be finite as a float32.")},
    BoundaryCase{"mask_value_0", {}, [](Inputs&, Params& p) { p.mask_value = 0.0; },
                 kValid, rejects(RuleId::mask_value_too_large, "mask_value=0.0 must be at most -1e+30.")},
    BoundaryCase{"mask_value_neg1", {}, [](Inputs&, Params& p) { p.mask_value = -1.0; },
                 kValid, rejects(RuleId::mask_value_too_large, "mask_value=-1.0 must be at most -1e+30.")},
    BoundaryCase{"mask_value_neg_1e30", {}, [](Inputs&, Params& p) { p.mask_value = -1e30; }, kValid, kValid},
    BoundaryCase{"mask_value_just_above_neg_1e30", {}, [](Inputs&, Params& p) { p.mask_value = std::nextafter(-1e30, 0.0); },
                 kValid, rejects(RuleId::mask_value_too_large, "mask_value=-9.999999999999999e+29 must be at most -1e+30.")},
    BoundaryCase{"mask_value_neg_flt_max", {}, [](Inputs&, Params& p) { p.mask_value = -double{FLT_MAX}; }, kValid, kValid},
    BoundaryCase{"mask_value_neg_inf", {}, [](Inputs&, Params& p) { p.mask_value = -INFINITY; },
                 kValid, rejects(RuleId::mask_value_nonfinite, "mask_value=-inf must be finite as a float32.")},
    BoundaryCase{"mask_value_past_float32", {}, [](Inputs&, Params& p) { p.mask_value = -3.5e38; },
                 kValid, rejects(RuleId::mask_value_nonfinite, "mask_value=-3.5e+38 must be finite as a float32.")},
    BoundaryCase{"k_scale_nan", {}, [](Inputs&, Params& p) { p.k_scale = std::nan(""); },
                 kValid, rejects(RuleId::k_scale_nonfinite, "k_scale=nan must be finite as a float32.")},
    BoundaryCase{"v_scale_inf", {}, [](Inputs&, Params& p) { p.v_scale = INFINITY; },
                 kValid, rejects(RuleId::v_scale_nonfinite, "v_scale=inf must be finite as a float32.")},
    BoundaryCase{"v_scale_0", {}, [](Inputs&, Params& p) { p.v_scale = 0.0; }, kValid, kValid},
    // --- block sizes and VMEM -----------------------------------------------------------
    BoundaryCase{"kv_block_eq_pages_per_seq", {}, [](Inputs&, Params& p) { p.num_kv_pages_per_block = 4; p.num_queries_per_block = 16; }, kValid, kValid},
    BoundaryCase{"kv_block_pages_per_seq_plus_1", {}, [](Inputs&, Params& p) { p.num_kv_pages_per_block = 5; p.num_queries_per_block = 16; },
                 rejects(RuleId::kv_pages_per_block_range, "num_kv_pages_per_block=5 must be in range (0, 4]."), kValid},
    BoundaryCase{"kv_block_1", {}, [](Inputs&, Params& p) { p.num_kv_pages_per_block = 1; p.num_queries_per_block = 16; }, kValid, kValid},
    BoundaryCase{"kv_block_0", {}, [](Inputs&, Params& p) { p.num_kv_pages_per_block = 0; p.num_queries_per_block = 16; },
                 rejects(RuleId::kv_pages_per_block_range, "num_kv_pages_per_block=0 must be in range (0, 4]."),
                 rejects(RuleId::kv_pages_per_block_nonpositive, "num_kv_pages_per_block=0 must be positive.")},
    BoundaryCase{"kv_block_huge", {}, [](Inputs&, Params& p) { p.num_kv_pages_per_block = int64_t{1} << 40; p.num_queries_per_block = 16; },
                 rejects(RuleId::kv_pages_per_block_range, "num_kv_pages_per_block=1099511627776 must be in range (0, 4]."),
                 rejects(RuleId::kv_len_overflows_int32, "kv_len=5 at sequence 0 with page_size=4 and num_kv_pages_per_block=1099511627776 overflows the kernel's int32 block arithmetic.")},
    BoundaryCase{"q_block_1", {}, [](Inputs&, Params& p) { p.num_kv_pages_per_block = 4; p.num_queries_per_block = 1; }, kValid, kValid},
    BoundaryCase{"q_block_0", {}, [](Inputs&, Params& p) { p.num_kv_pages_per_block = 4; p.num_queries_per_block = 0; },
                 rejects(RuleId::queries_per_block_nonpositive, "num_queries_per_block=0 must be positive."),
                 rejects(RuleId::queries_per_block_nonpositive, "num_queries_per_block=0 must be positive.")},
    BoundaryCase{"q_block_only", {}, [](Inputs&, Params& p) { p.num_queries_per_block = 8; },
                 kValid, rejects(RuleId::block_sizes_partial, "num_kv_pages_per_block=None and num_queries_per_block=8 must be given together.")},
    BoundaryCase{"vmem_0", {}, [](Inputs&, Params& p) { p.vmem_limit_bytes = 0; },
                 rejects(RuleId::vmem_limit_nonpositive, "vmem_limit_bytes=0 must be positive."),
                 rejects(RuleId::vmem_limit_nonpositive, "vmem_limit_bytes=0 must be positive.")},
    BoundaryCase{"vmem_neg1", {}, [](Inputs&, Params& p) { p.vmem_limit_bytes = -1; },
                 rejects(RuleId::vmem_limit_nonpositive, "vmem_limit_bytes=-1 must be positive."),
                 rejects(RuleId::vmem_limit_nonpositive, "vmem_limit_bytes=-1 must be positive.")},
    // (1, 1) blocks need 32768 (KV) + 16384 (l, m) + 4096 (acc) + 16384 (q, o) bytes.
    BoundaryCase{"vmem_1", {}, [](Inputs&, Params& p) { p.vmem_limit_bytes = 1; },
                 kValid, rejects(RuleId::vmem_budget_exceeded, "no block sizes fit: num_kv_pages_per_block=1 and num_queries_per_block=1 need 69632 bytes of VMEM, more than vmem_limit_bytes=1.")},
    BoundaryCase{"vmem_fits_1x1", {}, [](Inputs&, Params& p) { p.vmem_limit_bytes = 69632; }, kValid, kValid},
    BoundaryCase{"vmem_below_1x1", {}, [](Inputs&, Params& p) { p.vmem_limit_bytes = 69631; },
                 kValid, rejects(RuleId::vmem_budget_exceeded, "no block sizes fit: num_kv_pages_per_block=1 and num_queries_per_block=1 need 69632 bytes of VMEM, more than vmem_limit_bytes=69631.")},
    // (4, 16) blocks need 131072 (KV) + 65536 (l, m) + 65536 (acc) + 262144 (q, o) bytes.
    BoundaryCase{"vmem_exact_4x16", {}, [](Inputs&, Params& p) { p.num_kv_pages_per_block = 4; p.num_queries_per_block = 16; p.vmem_limit_bytes = 524288; }, kValid, kValid},
    BoundaryCase{"vmem_short_4x16", {}, [](Inputs&, Params& p) { p.num_kv_pages_per_block = 4; p.num_queries_per_block = 16; p.vmem_limit_bytes = 524287; },
                 kValid, rejects(RuleId::vmem_budget_exceeded, "num_kv_pages_per_block=4 and num_queries_per_block=16 need 524288 bytes of VMEM, more than vmem_limit_bytes=524287.")},
    BoundaryCase{"vmem_eq_capacity", {}, [](Inputs&, Params& p) { p.vmem_limit_bytes = int64_t{128} << 20; }, kValid, kValid},
    BoundaryCase{"vmem_over_capacity", {}, [](Inputs&, Params& p) { p.vmem_limit_bytes = (int64_t{128} << 20) + 1; },
                 kValid, rejects(RuleId::vmem_limit_over_capacity, "vmem_limit_bytes=134217729 must not exceed the v6e VMEM capacity of 134217728 bytes.")},
    // SMEM words: N + N * pages_per_seq + (N + 1) + 3, four bytes each; v2 has 16384 bytes.
    BoundaryCase{"smem_exact_v2", [](InputsSpec& s) { s.pages_per_seq = 1021; }, {}, kValid, kValid, *find_target_profile("v2")},
    BoundaryCase{"smem_over_v2", [](InputsSpec& s) { s.pages_per_seq = 1022; }, {},
                 kValid, rejects(RuleId::smem_budget_exceeded, "the prefetched index arrays need 16400 bytes of SMEM, more than the v2 capacity of 16384 bytes."),
                 *find_target_profile("v2")},
    // --- sequences ----------------------------------------------------------------------
    BoundaryCase{"num_seqs_eq_max", {}, [](Inputs& in, Params&) { in.num_seqs.set_int(0, 4); }, kValid, kValid},
    BoundaryCase{"num_seqs_over_max", {}, [](Inputs& in, Params&) { in.num_seqs.set_int(0, 5); },
                 rejects(RuleId::num_seqs_too_large, "num_seqs[0]=5 must be less or equal to max_num_seqs=4"),
                 rejects(RuleId::num_seqs_too_large, "num_seqs[0]=5 must be less or equal to max_num_seqs=4")},
    BoundaryCase{"num_seqs_0", {}, [](Inputs& in, Params&) { in.num_seqs.set_int(0, 0); }, kValid, kValid},
    BoundaryCase{"num_seqs_neg1", {}, [](Inputs& in, Params&) { in.num_seqs.set_int(0, -1); },
                 rejects(RuleId::num_seqs_negative, "num_seqs[0]=-1 must be non-negative."),
                 rejects(RuleId::num_seqs_negative, "num_seqs[0]=-1 must be non-negative.")},
    // numpy reads cu_q_lens[-1] = cu_q_lens[4] = 6 > T = 5: a clean JAX error.
    BoundaryCase{"num_seqs_neg1_wraps_to_total", [](InputsSpec& s) { s.max_num_batched_tokens = 5; }, [](Inputs& in, Params&) { in.num_seqs.set_int(0, -1); },
                 rejects(RuleId::total_q_tokens_too_large, "Total q tokens 6 must be less or equal to max_num_batched_tokens=5."),
                 rejects(RuleId::num_seqs_negative, "num_seqs[0]=-1 must be non-negative.")},
    BoundaryCase{"num_seqs_neg5_last_index", {}, [](Inputs& in, Params&) { in.num_seqs.set_int(0, -5); },
                 rejects(RuleId::num_seqs_negative, "num_seqs[0]=-5 must be non-negative."),
                 rejects(RuleId::num_seqs_negative, "num_seqs[0]=-5 must be non-negative.")},
    BoundaryCase{"num_seqs_neg6_index_error", {}, [](Inputs& in, Params&) { in.num_seqs.set_int(0, -6); },
                 rejects(RuleId::num_seqs_negative, "num_seqs[0]=-6 must be non-negative."),
                 rejects(RuleId::num_seqs_negative, "num_seqs[0]=-6 must be non-negative.")},
    // JAX's cdiv by page_size 0 does not raise in XLA, so its later checks still run.
    BoundaryCase{"page_size_0_then_q_len", {}, [](Inputs& in, Params&) { in.kv_pages = zeros(DType::kFloat32, {16, 0, 4, 128}); in.kv_lens.set_int(2, 1); },
                 rejects(RuleId::q_len_exceeds_kv_len, "q_len=2 must be less or equal to kv_len=1 at sequence 2."),
                 rejects(RuleId::page_size_zero, "page_size=0 must be positive.")},
    BoundaryCase{"max_num_seqs_0", [](InputsSpec& s) { s.seqs = {}; s.max_num_seqs = 0; }, {},
                 rejects(RuleId::max_num_seqs_zero, "max_num_seqs=0 must be positive."),
                 rejects(RuleId::max_num_seqs_zero, "max_num_seqs=0 must be positive.")},
    // JAX's validators accept it (no kv_len needs a page); the kernel DMAs page_indices[0, 0].
    BoundaryCase{"pages_per_seq_0", [](InputsSpec& s) { s.seqs = {}; s.max_num_seqs = 1; s.pages_per_seq = 0; }, {},
                 rejects(RuleId::pages_per_seq_zero, "pages_per_seq=0 must be positive (the Pallas kernel DMAs page_indices[0, 0] for its first KV block)."),
                 rejects(RuleId::pages_per_seq_zero, "pages_per_seq=0 must be positive.")},
    // The kernel prefetches page_indices[i, 0] of every sequence, and of slot 0 with none.
    BoundaryCase{"kv_len_0_first_page_garbage", {}, [](Inputs& in, Params&) { set_ints(in.cu_q_lens, {0, 1, 4, 4, 4}); in.kv_lens.set_int(2, 0); in.page_indices.set_int(2 * 4, -1); },
                 kValid, rejects(RuleId::page_index_out_of_range, "page_indices[2, 0]=-1 must be in range [0, 16) (the kernel prefetches the first page of sequence slot 2 even with nothing to read).")},
    // The first grid cell prefetches KV block 0 of sequence slot 0 even with no sequences,
    // with slot 0's (here padding) kv_len 5: page columns 0 and 1.
    BoundaryCase{"no_seqs_first_page_garbage", {}, [](Inputs& in, Params&) { in.num_seqs.set_int(0, 0); in.page_indices.set_int(0, 99); },
                 rejects(RuleId::page_index_out_of_range, "page_indices[0, 0]=99 must be in range [0, 16) (the Pallas kernel DMAs it for KV block 0 of sequence 0; interpret mode raises IndexError)."),
                 rejects(RuleId::page_index_out_of_range, "page_indices[0, 0]=99 must be in range [0, 16) (the kernel prefetches the first page of sequence slot 0 even with nothing to read).")},
    BoundaryCase{"no_seqs_second_page_garbage", {}, [](Inputs& in, Params&) { in.num_seqs.set_int(0, 0); in.page_indices.set_int(1, 99); },
                 rejects(RuleId::page_index_out_of_range, "page_indices[0, 1]=99 must be in range [0, 16) (the Pallas kernel DMAs it for KV block 0 of sequence 0; interpret mode raises IndexError)."),
                 rejects(RuleId::page_index_out_of_range, "page_indices[0, 1]=99 must be in range [0, 16) (the Pallas kernel DMAs it for KV block 0 of sequence 0, its kv_lens entry 5 counting the pages).")},
    // Padding kv_lens[0] = 4 (one page): only entry [0, 0] is DMA'd.
    BoundaryCase{"no_seqs_second_page_garbage_one_page", {}, [](Inputs& in, Params&) { in.num_seqs.set_int(0, 0); in.kv_lens.set_int(0, 4); in.page_indices.set_int(1, 99); }, kValid, kValid},
    BoundaryCase{"no_seqs_third_page_garbage", {}, [](Inputs& in, Params&) { in.num_seqs.set_int(0, 0); in.page_indices.set_int(2, 99); }, kValid, kValid},
    BoundaryCase{"page_size_0", {}, [](Inputs& in, Params&) { in.kv_pages = zeros(DType::kFloat32, {16, 0, 4, 128}); },
                 rejects(RuleId::page_size_zero, "page_size=0 must be positive."),
                 rejects(RuleId::page_size_zero, "page_size=0 must be positive.")},
    BoundaryCase{"padding_kv_len_16", {}, [](Inputs& in, Params&) { in.kv_lens.set_int(3, 16); }, kValid, kValid},
    BoundaryCase{"padding_kv_len_17", {}, [](Inputs& in, Params&) { in.kv_lens.set_int(3, 17); },
                 rejects(RuleId::pages_per_seq_too_small, "pages_per_seq=4 must be greater or equal to min_pages_per_seq=5 given max_kv_len=17 and page_size=4."),
                 kValid},
    BoundaryCase{"used_kv_len_17", {}, [](Inputs& in, Params&) { in.kv_lens.set_int(1, 17); },
                 rejects(RuleId::pages_per_seq_too_small, "pages_per_seq=4 must be greater or equal to min_pages_per_seq=5 given max_kv_len=17 and page_size=4."),
                 rejects(RuleId::pages_per_seq_too_small, "pages_per_seq=4 must be greater or equal to min_pages_per_seq=5 given max_kv_len=17 and page_size=4.")},
    // JAX computes cdiv(max_kv_len, page_size) in int32: INT32_MAX + 3 wraps negative, so a
    // kv_len of INT32_MAX in a used sequence passes its pages_per_seq check.
    // Then the kernel's KV loop (16 tokens a block) wraps int32 before reaching it.
    BoundaryCase{"used_kv_len_int32_max", {}, [](Inputs& in, Params&) { in.kv_lens.set_int(1, 2147483647); },
                 rejects(RuleId::kv_block_loop_wraps_int32, "kv_len=2147483647 at sequence 1: the Pallas kernel's KV loop compares kv_blk * 16 with kv_len in int32, which wraps before reaching it."),
                 rejects(RuleId::pages_per_seq_too_small, "pages_per_seq=4 must be greater or equal to min_pages_per_seq=536870912 given max_kv_len=2147483647 and page_size=4.")},
    // One sequence over 2048 pages of 2^20 tokens, all aliasing page 0 (D = 1 keeps it 8 MB,
    // so jax mode stops at the Pallas kernel's head_dim first).
    BoundaryCase{"kv_len_block_wraps_int32", huge_pages_spec, [](Inputs& in, Params& p) { in.kv_lens.set_int(0, 2147483647); huge_pages_blocks(in, p); },
                 rejects(RuleId::head_dim_not_lane_multiple, "head_dim=1 must be a positive multiple of 128 for the Pallas kernel (broadcast_to_shape asserts head_dim % 128 == 0)."),
                 rejects(RuleId::kv_len_overflows_int32, "kv_len=2147483647 at sequence 0 with page_size=1048576 and num_kv_pages_per_block=1 overflows the kernel's int32 block arithmetic.")},
    // 2^31 - 2^20 + 2^20 - 1 = INT32_MAX: the block walk fits; the 8 GiB KV buffer does not.
    BoundaryCase{"kv_len_block_fits_int32", huge_pages_spec, [](Inputs& in, Params& p) { in.kv_lens.set_int(0, 2147483648 - 1048576); huge_pages_blocks(in, p); },
                 rejects(RuleId::head_dim_not_lane_multiple, "head_dim=1 must be a positive multiple of 128 for the Pallas kernel (broadcast_to_shape asserts head_dim % 128 == 0)."),
                 rejects(RuleId::vmem_budget_exceeded, "num_kv_pages_per_block=1 and num_queries_per_block=1 need 8589963264 bytes of VMEM, more than the default scoped limit of 33554432 bytes.")},
    BoundaryCase{"cu_q_lens_0_is_1", {}, [](Inputs& in, Params&) { set_ints(in.cu_q_lens, {1, 1, 4, 6, 6}); },
                 kValid, rejects(RuleId::cu_q_lens_first_nonzero, "cu_q_lens[0]=1 must be 0.")},
    BoundaryCase{"cu_q_lens_decreasing", {}, [](Inputs& in, Params&) { set_ints(in.cu_q_lens, {0, 3, 1, 3, 3}); },
                 kValid, rejects(RuleId::cu_q_lens_decreasing, "cu_q_lens[2]=1 must be greater or equal to cu_q_lens[1]=3 (q_len=-2 at sequence 1).")},
    BoundaryCase{"kv_len_neg1_q_len_0", {}, [](Inputs& in, Params&) { set_ints(in.cu_q_lens, {0, 1, 4, 4, 4}); in.kv_lens.set_int(2, -1); },
                 rejects(RuleId::q_len_exceeds_kv_len, "q_len=0 must be less or equal to kv_len=-1 at sequence 2."),
                 rejects(RuleId::kv_len_negative, "kv_len=-1 must be non-negative at sequence 2.")},
    BoundaryCase{"kv_len_neg1_q_len_neg1", {}, [](Inputs& in, Params&) { set_ints(in.cu_q_lens, {0, 1, 4, 3, 3}); in.kv_lens.set_int(2, -1); },
                 kValid, rejects(RuleId::cu_q_lens_decreasing, "cu_q_lens[3]=3 must be greater or equal to cu_q_lens[2]=4 (q_len=-1 at sequence 2).")},
    BoundaryCase{"tokens_eq_T", [](InputsSpec& s) { s.max_num_batched_tokens = 6; }, {}, kValid, kValid},
    BoundaryCase{"tokens_over_T", [](InputsSpec& s) { s.max_num_batched_tokens = 5; }, {},
                 rejects(RuleId::total_q_tokens_too_large, "Total q tokens 6 must be less or equal to max_num_batched_tokens=5."),
                 rejects(RuleId::total_q_tokens_too_large, "Total q tokens 6 must be less or equal to max_num_batched_tokens=5.")},
    BoundaryCase{"q_len_eq_kv_len", {}, [](Inputs& in, Params&) { in.kv_lens.set_int(1, 3); }, kValid, kValid},
    BoundaryCase{"q_len_over_kv_len", {}, [](Inputs& in, Params&) { in.kv_lens.set_int(2, 1); },
                 rejects(RuleId::q_len_exceeds_kv_len, "q_len=2 must be less or equal to kv_len=1 at sequence 2."),
                 rejects(RuleId::q_len_exceeds_kv_len, "q_len=2 must be less or equal to kv_len=1 at sequence 2.")},
    BoundaryCase{"page_index_last", {}, [](Inputs& in, Params&) { in.page_indices.set_int(1 * 4 + 1, 15); }, kValid, kValid},
    BoundaryCase{"page_index_eq_P", {}, [](Inputs& in, Params&) { in.page_indices.set_int(1 * 4 + 1, 16); },
                 rejects(RuleId::page_index_out_of_range, "page_indices[1, 1]=16 must be in range [0, 16) (the Pallas kernel DMAs it for KV block 0 of sequence 1; interpret mode raises IndexError)."),
                 rejects(RuleId::page_index_out_of_range, "page_indices[1, 1]=16 must be in range [0, 16) (sequence 1 reads 2 pages).")},
    // Interpret mode indexes pages as numpy does: -16..-1 from the end.
    BoundaryCase{"page_index_neg1", {}, [](Inputs& in, Params&) { in.page_indices.set_int(0, -1); },
                 kValid, rejects(RuleId::page_index_out_of_range, "page_indices[0, 0]=-1 must be in range [0, 16) (sequence 0 reads 2 pages).")},
    BoundaryCase{"page_index_neg_P", {}, [](Inputs& in, Params&) { in.page_indices.set_int(0, -16); },
                 kValid, rejects(RuleId::page_index_out_of_range, "page_indices[0, 0]=-16 must be in range [0, 16) (sequence 0 reads 2 pages).")},
    BoundaryCase{"page_index_neg_P_minus_1", {}, [](Inputs& in, Params&) { in.page_indices.set_int(0, -17); },
                 rejects(RuleId::page_index_out_of_range, "page_indices[0, 0]=-17 must be in range [0, 16) (the Pallas kernel DMAs it for KV block 0 of sequence 0; interpret mode raises IndexError)."),
                 rejects(RuleId::page_index_out_of_range, "page_indices[0, 0]=-17 must be in range [0, 16) (sequence 0 reads 2 pages).")},
    // --- where the Pallas kernel itself fails on what JAX's validators accept -----------
    BoundaryCase{"no_q_rows", [](InputsSpec& s) { s.seqs = {}; s.max_num_batched_tokens = 0; }, {},
                 rejects(RuleId::max_num_batched_tokens_zero, "max_num_batched_tokens=0 must be positive (the Pallas kernel reads a block of q, and its default num_queries_per_block would be 0)."),
                 kValid},
    BoundaryCase{"no_q_rows_blocks_given", [](InputsSpec& s) { s.seqs = {}; s.max_num_batched_tokens = 0; },
                 [](Inputs&, Params& p) { p.num_kv_pages_per_block = 1; p.num_queries_per_block = 1; },
                 rejects(RuleId::max_num_batched_tokens_zero, "max_num_batched_tokens=0 must be positive (the Pallas kernel reads a block of q)."),
                 kValid},
    // No pages at all and page_size 2^31: JAX's validators accept an empty batch; its kernel
    // multiplies by bkv * page_size in int32.
    BoundaryCase{"page_size_past_int32", {}, [](Inputs& in, Params&) { in.num_seqs.set_int(0, 0); for (int64_t i = 0; i < 3; ++i) in.kv_lens.set_int(i, 0); in.kv_pages = zeros(DType::kFloat32, {0, int64_t{1} << 31, 4, 128}); },
                 rejects(RuleId::kv_block_loop_wraps_int32, "num_kv_pages_per_block=4 times page_size=2147483648 must fit in int32: the Pallas kernel's KV loop multiplies by it (OverflowError when tracing)."),
                 rejects(RuleId::page_index_out_of_range, "page_indices[0, 0]=0 must be in range [0, 0) (the kernel prefetches the first page of sequence slot 0 even with nothing to read).")},
    BoundaryCase{"one_q_row", [](InputsSpec& s) { s.seqs = {{1, 1}}; s.max_num_batched_tokens = 1; }, {}, kValid, kValid},
    BoundaryCase{"fp8_kv_k_scale_only", [](InputsSpec& s) { s.q_dtype = DType::kBFloat16; s.kv_dtype = DType::kFloat8E4M3FN; },
                 [](Inputs&, Params& p) { p.k_scale = 0.5; },
                 rejects(RuleId::kv_scales_one_sided, "k_scale is set and v_scale is not: with kv_pages.dtype=dtype(float8_e4m3fn) and q.dtype=dtype(bfloat16) the Pallas kernel's K and V get different dtypes (it asserts k.dtype == v.dtype)."),
                 kValid},
    BoundaryCase{"fp8_kv_v_scale_only", [](InputsSpec& s) { s.q_dtype = DType::kBFloat16; s.kv_dtype = DType::kFloat8E5M2; },
                 [](Inputs&, Params& p) { p.v_scale = 2.0; },
                 rejects(RuleId::kv_scales_one_sided, "v_scale is set and k_scale is not: with kv_pages.dtype=dtype(float8_e5m2) and q.dtype=dtype(bfloat16) the Pallas kernel's K and V get different dtypes (it asserts k.dtype == v.dtype)."),
                 kValid},
    BoundaryCase{"fp8_kv_both_scales", [](InputsSpec& s) { s.q_dtype = DType::kBFloat16; s.kv_dtype = DType::kFloat8E4M3FN; },
                 [](Inputs&, Params& p) { p.k_scale = 0.5; p.v_scale = 2.0; }, kValid, kValid},
    BoundaryCase{"f32_kv_k_scale_only", {}, [](Inputs&, Params& p) { p.k_scale = 0.5; }, kValid, kValid},
    BoundaryCase{"kv_bool", [](InputsSpec& s) { s.kv_dtype = DType::kBool; }, {},
                 rejects(RuleId::kv_dtype_unsupported, "kv_pages.dtype=dtype('bool') cannot be loaded by the Pallas kernel (its strided KV load bitcasts it, which lax.bitcast_convert_type refuses)."),
                 rejects(RuleId::kv_dtype_unsupported, "kv_pages.dtype=dtype('bool') must be float32, bfloat16, float8_e4m3fn or float8_e5m2.")},
    BoundaryCase{"kv_int8", [](InputsSpec& s) { s.kv_dtype = DType::kInt8; }, {},
                 kValid,
                 rejects(RuleId::kv_dtype_unsupported, "kv_pages.dtype=dtype('int8') must be float32, bfloat16, float8_e4m3fn or float8_e5m2.")},
    // --- the Pallas program (schedule/jax_program.h) ---------------------------------
    // An empty sequence 1 (kv_len 0): its prefetched block (page 2) is what sequence 2's
    // step reads (it needs page 4), one grid cell, one heads block.
    BoundaryCase{"empty_sequence_then_rows", {}, [](Inputs& in, Params&) { set_ints(in.cu_q_lens, {0, 1, 1, 3, 3}); in.kv_lens.set_int(1, 0); },
                 kValid, rejects(RuleId::stale_kv_block, "heads block 0, query block 0: the Pallas kernel computes KV block 0 of sequence 2 from the block it prefetched for KV block 0 of sequence 1, which no step consumed (sequence 1 has kv_len 0).")},
    // The same with sequence 1's first page shared with sequence 2's only one: the data agree.
    BoundaryCase{"empty_sequence_shares_the_page", {}, [](Inputs& in, Params&) { set_ints(in.cu_q_lens, {0, 1, 1, 3, 3}); in.kv_lens.set_int(1, 0); in.page_indices.set_int(1 * 4, 4); },
                 kValid, kValid},
    // Empty last sequence: no step reads its prefetched block.
    BoundaryCase{"empty_last_sequence", {}, [](Inputs& in, Params&) { set_ints(in.cu_q_lens, {0, 1, 4, 4, 4}); in.kv_lens.set_int(2, 0); },
                 kValid, kValid},
    // Two heads blocks (8 q heads over 8 kv heads, float32: 4 a block), query blocks of 4:
    // rows 0..3 end exactly at block 0's end, so heads block 0 hands sequence 2 (q_len 0)
    // to heads block 1, which never computes sequences 0 and 1.
    BoundaryCase{"trailing_empty_sequence_at_block_end", [](InputsSpec& s) { s.num_q_heads = 8; s.num_kv_heads = 8; s.seqs = {{2, 5}, {2, 7}, {0, 3}}; },
                 [](Inputs&, Params& p) { p.num_kv_pages_per_block = 1; p.num_queries_per_block = 4; },
                 kValid, rejects(RuleId::rows_not_computed, "heads block 1, query block 0: rows 0..1 of sequence 0 are never computed (the Pallas kernel starts the block past that sequence, as the previous heads block left seq_buf_idx), so they keep earlier values.")},
    BoundaryCase{"trailing_empty_sequence_inside_block", [](InputsSpec& s) { s.num_q_heads = 8; s.num_kv_heads = 8; s.seqs = {{2, 5}, {2, 7}, {0, 3}}; },
                 [](Inputs&, Params& p) { p.num_kv_pages_per_block = 1; p.num_queries_per_block = 8; },
                 kValid, kValid},
    BoundaryCase{"trailing_empty_sequence_one_heads_block", [](InputsSpec& s) { s.seqs = {{2, 5}, {2, 7}, {0, 3}}; },
                 [](Inputs&, Params& p) { p.num_kv_pages_per_block = 1; p.num_queries_per_block = 4; },
                 kValid, kValid},
    BoundaryCase{"page_index_unused_garbage", {}, [](Inputs& in, Params&) { in.page_indices.set_int(2 * 4 + 1, 999); in.page_indices.set_int(3 * 4, -7); }, kValid, kValid});

INSTANTIATE_TEST_SUITE_P(Rules, ValidateBoundary, kCases,
                         [](const ::testing::TestParamInfo<BoundaryCase>& p) { return p.param.name; });

}  // namespace
}  // namespace rpa
