// How a TPU's MXU evaluates a matmul of float32 operands: in six, three or one bfloat16
// passes (`--dot-passes`, oracle/jax_tolerance.cc items K2 and K3). The kernel semantics assumes
// six by default (Mosaic's float32 contract precision; unverified: no TPU here).
#pragma once

#include <optional>
#include <string_view>

namespace rpa {

enum class DotPasses : int { kSix = 6, kThree = 3, kOne = 1 };

// "6", "3" or "1", as `--dot-passes` takes them.
std::optional<DotPasses> parse_dot_passes(std::string_view text);
int dot_pass_count(DotPasses passes);

// The relative error per product a*b of such a matmul, with a (b) float32 or exactly a
// bfloat16 value (bfloat16, float8): the bound and its proof are in dot_precision.cc.
double mxu_product_error(DotPasses passes, bool a_float32, bool b_float32);

// The most relative logit error per unit of B_t the kernel semantics may assume with these
// passes: float32 accumulation (kLeastLogitError) plus the MXU's q.K error for float32 q and
// K. dense_reference needs it (its most_logit_error) before kernel_tolerance can use it.
double most_logit_error(DotPasses passes);

}  // namespace rpa
