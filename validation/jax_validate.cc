#include "validation/jax_validate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/float32_scalar.h"
#include "core/python_repr.h"
#include "schedule/jax_program.h"
#include "validation/jax_heads_per_block.h"
#include "validation/jax_kernel_plan.h"
#include "validation/jax_program_rules.h"
#include "validation/jax_vmem_budget.h"

namespace rpa {
namespace {

// Validation walks at most this many steps of the Pallas program (a few integer
// operations each, ~1/1000 of the kernel's work); past it the program rules are not
// evaluated.
constexpr int64_t kMaxWalkedSteps = int64_t{1} << 24;

std::string I(int64_t v) { return py_int_repr(v); }
std::string F(double v) { return py_float_repr(v); }
std::string opt_int(const std::optional<int64_t>& v) { return v ? I(*v) : "None"; }

// JAX's dynamic checks run on int32 jax arrays: sums and differences wrap.
int32_t wrap32(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }

// Two's complement addition without signed overflow (JAX's int32 sums wrap anyway).
int64_t add_wrapping(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}

// The definition takes every scalar parameter as a float32.
bool finite_as_float32(double v) { return std::isfinite(static_cast<float>(v)); }

bool is_float8(DType t) { return t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2; }

// num_seqs[0] as numpy hands it to Python: an int of any width, a bool, or a float.
struct NumpyScalar {
  enum Kind { kInt, kBool, kFloat } kind = kInt;
  int64_t value = 0;   // kInt, kBool
  bool huge = false;   // a uint64 above INT64_MAX
  double f = 0.0;      // kFloat
  std::string repr;    // as Python prints it

  bool greater_than(int64_t n) const {
    if (kind == kFloat) return f > static_cast<double>(n);  // NaN is never greater
    return huge || value > n;
  }
};

NumpyScalar numpy_scalar(const Tensor& t) {
  NumpyScalar s;
  const DType d = t.dtype();
  if (d == DType::kBool) {
    s.kind = NumpyScalar::kBool;
    s.value = t.int_at(0);
    s.repr = s.value ? "True" : "False";
  } else if (dtype_is_float(d)) {
    s.kind = NumpyScalar::kFloat;
    s.f = t.float_at(0);
    s.repr = d == DType::kFloat64 ? py_float_repr(s.f) : py_float32_repr(static_cast<float>(s.f));
  } else if (d == DType::kUInt64) {
    uint64_t u = 0;
    std::memcpy(&u, t.data(), sizeof u);
    s.huge = u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    s.value = s.huge ? 0 : static_cast<int64_t>(u);
    s.repr = std::to_string(u);
  } else {
    s.value = t.int_at(0);
    s.repr = py_int_repr(s.value);
  }
  return s;
}

// Collects failures of the rules the mode enforces; in first-only mode it tells the walk
// to stop at the first one.
class Checker {
 public:
  Checker(Mode mode, bool first_only) : mode_(mode), first_only_(first_only) {}

  bool enforces(RuleId id) const { return rule_info(id).in(mode_); }
  Mode mode() const { return mode_; }
  bool strict() const { return mode_ == Mode::kStrict; }

  // Records a failure when the mode enforces the rule. Returns whether it was recorded.
  bool reject(RuleId id, std::string message) {
    if (!enforces(id)) return false;
    failures_.push_back(Failure{id, std::move(message)});
    return true;
  }
  bool done() const { return first_only_ && !failures_.empty(); }
  bool clean() const { return failures_.empty(); }
  std::vector<Failure> take() { return std::move(failures_); }

 private:
  Mode mode_;
  bool first_only_;
  std::vector<Failure> failures_;
};

// Walks the rule table in order. Returns early when the checker is done, or when a failed
// rule leaves the later rules without the dimensions or values they read.
class Walk {
 public:
  Walk(const Inputs& in, const Params& p, const ValidateOptions& o, Checker& c)
      : in_(in), p_(p), opt_(o), c_(c) {}

  void run() {
    if (!shapes()) return;
    if (!static_rules() || c_.done()) return;
    if (dynamic_ok_) c_.strict() ? strict_dynamic_rules() : jax_dynamic_rules();
    if (c_.done()) return;
    kernel_entry_rules();
    for (Failure& f : deferred_) {
      if (c_.done()) return;
      reject(f.rule, std::move(f.message));
    }
    if (c_.done()) return;
    c_.strict() ? strict_program_rules() : jax_pallas_rules();
  }

 private:
  // q_rank .. page_indices_rank: without these no dimension can be named.
  bool shapes() {
    const bool q_ok = in_.q.rank() == 3;
    if (!q_ok && reject(RuleId::q_rank, "q.shape=" + shape_repr(in_.q.shape()) +
                                             " must have rank 3: [max_num_batched_tokens, "
                                             "num_q_heads, head_dim].")) {
      if (c_.done()) return false;
    }
    const bool kv_ok = in_.kv_pages.rank() == 4;
    if (!kv_ok) {
      reject(RuleId::kv_pages_rank, "kv_pages.shape=" + shape_repr(in_.kv_pages.shape()) +
                                        " must have rank 4: [total_num_pages, page_size, "
                                        "num_combined_kv_heads, head_dim].");
    }
    if (!q_ok || !kv_ok) return false;
    T_ = in_.q.dim(0);
    Hq_ = in_.q.dim(1);
    D_ = in_.q.dim(2);
    P_ = in_.kv_pages.dim(0);
    S_ = in_.kv_pages.dim(1);
    Hc_ = in_.kv_pages.dim(2);
    Dk_ = in_.kv_pages.dim(3);
    Hkv_ = Hc_ / 2;
    if (Hc_ % 2 != 0) {
      heads_ok_ = false;
      reject(RuleId::combined_heads_odd,
             "num_combined_kv_heads=" + I(Hc_) + " must be even.");
      if (c_.done()) return false;
    }
    if (in_.page_indices.rank() != 2) {
      reject(RuleId::page_indices_rank, "page_indices.shape=" +
                                            shape_repr(in_.page_indices.shape()) +
                                            " must have rank 2: [max_num_seqs, pages_per_seq].");
      return false;
    }
    N_ = in_.page_indices.dim(0);
    pps_ = in_.page_indices.dim(1);
    return true;
  }

  bool static_rules() {
    const Shape one{1};
    if (in_.num_seqs.shape() != one) {
      dynamic_ok_ = false;
      if (reject(RuleId::num_seqs_shape,
                 "num_seqs.shape=" + shape_repr(in_.num_seqs.shape()) + " must be (1,)") &&
          c_.done())
        return false;
    }
    if (Dk_ != D_ &&
        reject(RuleId::head_dim_mismatch, "Q head_dim " + I(D_) +
                                              " must be the same as that of K/V " + I(Dk_) +
                                              ".") &&
        c_.done())
      return false;
    if (in_.kv_lens.shape() != Shape{N_}) {
      dynamic_ok_ = false;
      if (reject(RuleId::kv_lens_shape,
                 "Expected kv_lens.shape=" + shape_repr(in_.kv_lens.shape()) + " to be (" +
                     I(N_) + ",) where `max_num_seqs` is `page_indices.shape[0]`.") &&
          c_.done())
        return false;
    }
    // N + 1 as Python computes it: exact even at N = INT64_MAX, where no shape can match.
    const std::string n_plus_1 =
        N_ < std::numeric_limits<int64_t>::max() ? I(N_ + 1) : "9223372036854775808";
    if (N_ == std::numeric_limits<int64_t>::max() || in_.cu_q_lens.shape() != Shape{N_ + 1}) {
      dynamic_ok_ = false;
      if (reject(RuleId::cu_q_lens_shape,
                 "Expected cu_q_lens.shape=" + shape_repr(in_.cu_q_lens.shape()) + " to be (" +
                     n_plus_1 + ",)  where `max_num_seqs` is `page_indices.shape[0]`.") &&
          c_.done())
        return false;
    }
    if (in_.kv_lens.dtype() != DType::kInt32 || in_.page_indices.dtype() != DType::kInt32 ||
        in_.cu_q_lens.dtype() != DType::kInt32) {
      dynamic_ok_ = false;
      if (reject(RuleId::index_dtype,
                 "The dtype of `kv_lens`, `page_indices`, and `cu_q_lens` must be int32. Got "
                 "kv_lens.dtype=" +
                     dtype_repr(in_.kv_lens.dtype()) +
                     ", page_indices.dtype=" + dtype_repr(in_.page_indices.dtype()) +
                     ", cu_q_lens.dtype=" + dtype_repr(in_.cu_q_lens.dtype()) + ".") &&
          c_.done())
        return false;
    }
    const DType ns = in_.num_seqs.dtype();
    // jax mode meets a float or bool num_seqs where JAX does, in the dynamic rules.
    if (c_.strict() && ns != DType::kInt32) {
      dynamic_ok_ = false;
      if (reject(RuleId::num_seqs_dtype,
                 "num_seqs.dtype=" + dtype_repr(ns) + " must be int32.") &&
          c_.done())
        return false;
    }
    const DType qt = in_.q.dtype();
    const DType kt = in_.kv_pages.dtype();
    if (!is_kernel_q_dtype(qt)) {
      dtypes_ok_ = false;
      // jax mode: JAX's validators accept it; the Pallas kernel asserts it when tracing.
      if (c_.strict() && reject(RuleId::q_dtype_unsupported,
                 "q.dtype=" + dtype_repr(qt) + " must be float32 or bfloat16.") &&
          c_.done())
        return false;
    }
    if (!is_kernel_kv_dtype(kt)) {
      dtypes_ok_ = false;
      // jax mode: JAX's validators accept any; the Pallas kernel fails only on bool.
      if (c_.strict() && reject(RuleId::kv_dtype_unsupported,
                 "kv_pages.dtype=" + dtype_repr(kt) +
                     " must be float32, bfloat16, float8_e4m3fn or float8_e5m2.") &&
          c_.done())
        return false;
    }
    if (dtypes_ok_ && qt != kt && !is_float8(kt) &&
        reject(RuleId::dtype_mismatch, "q.dtype=" + dtype_repr(qt) + " and kv_pages.dtype=" +
                                           dtype_repr(kt) +
                                           " must be equal unless kv_pages is float8.") &&
        c_.done())
      return false;
    if (heads_ok_ && Hkv_ == 0) {
      heads_ok_ = false;
      if (reject(RuleId::kv_heads_zero, "num_kv_heads=0 must be positive.") && c_.done())
        return false;
    }
    if (heads_ok_ && Hq_ % Hkv_ != 0) {
      heads_ok_ = false;
      if (reject(RuleId::heads_not_divisible, "num_q_heads=" + I(Hq_) +
                                                  " must be divisible by num_kv_heads=" +
                                                  I(Hkv_)) &&
          c_.done())
        return false;
    }
    if (Hq_ == 0) {
      dims_ok_ = false;
      // jax mode: JAX's validators accept it; the Pallas kernel raises (jax_pallas_rules).
      if (c_.strict() && reject(RuleId::q_heads_zero, "num_q_heads=0 must be positive.") &&
          c_.done())
        return false;
    }
    if (D_ == 0) {
      dims_ok_ = false;
      if (reject(RuleId::head_dim_zero, "head_dim=0 must be positive.") && c_.done())
        return false;
    }
    return param_rules();
  }

  bool param_rules() {
    if (p_.sliding_window && *p_.sliding_window <= 0 &&
        reject(RuleId::sliding_window_nonpositive,
               "sliding_window=" + I(*p_.sliding_window) + " must be positive.") &&
        c_.done())
      return false;
    // jax mode: JAX's validators accept it; the Pallas kernel raises when tracing it.
    if (c_.strict() && sliding_window_too_large() && c_.done())
      return false;
    if (p_.soft_cap && *p_.soft_cap == 0.0 &&
        reject(RuleId::soft_cap_zero, "soft_cap=" + F(*p_.soft_cap) + " must not be 0.0.") &&
        c_.done())
      return false;
    // strict: the kernels divide by the cap as a float32 (float32_scalar), where one below
    // 2^-126 is 0 or a subnormal a TPU (and rpa's kernel) flushes to 0: 0 / 0 on a logit of 0.
    if (c_.strict() && p_.soft_cap && *p_.soft_cap != 0.0 && float32_scalar(*p_.soft_cap) == 0.0f &&
        reject(RuleId::soft_cap_zero, soft_cap_flushed_message(*p_.soft_cap)) && c_.done())
      return false;
    if (!finite_scalar(RuleId::soft_cap_nonfinite, "soft_cap", p_.soft_cap)) return false;
    if (!finite_scalar(RuleId::sm_scale_nonfinite, "sm_scale", p_.sm_scale)) return false;
    if (p_.mask_value && !finite_as_float32(*p_.mask_value) &&
        reject(RuleId::mask_value_nonfinite,
               "mask_value=" + F(*p_.mask_value) + " must be finite as a float32.") &&
        c_.done())
      return false;
    // A padded slot's logit is exactly mask_value; at or below -1e30 its weight
    // exp(mask_value - m) is 0 in float32 against any logit of magnitude below 1e29.
    if (p_.mask_value && finite_as_float32(*p_.mask_value) && *p_.mask_value > kMaxExactMaskValue &&
        reject(RuleId::mask_value_too_large,
               "mask_value=" + F(*p_.mask_value) + " must be at most -1e+30.") &&
        c_.done())
      return false;
    if (!finite_scalar(RuleId::k_scale_nonfinite, "k_scale", p_.k_scale)) return false;
    if (!finite_scalar(RuleId::v_scale_nonfinite, "v_scale", p_.v_scale)) return false;

    const auto& bkv = p_.num_kv_pages_per_block;
    const auto& bq = p_.num_queries_per_block;
    const auto& vmem = p_.vmem_limit_bytes;
    if (bkv && !(0 < *bkv && *bkv <= pps_) &&
        reject(RuleId::kv_pages_per_block_range, "num_kv_pages_per_block=" + I(*bkv) +
                                                     " must be in range (0, " + I(pps_) +
                                                     "].") &&
        c_.done())
      return false;
    if (!positive_block_param(RuleId::kv_pages_per_block_nonpositive, "num_kv_pages_per_block",
                              bkv) ||
        !positive_block_param(RuleId::queries_per_block_nonpositive, "num_queries_per_block", bq) ||
        !positive_block_param(RuleId::vmem_limit_nonpositive, "vmem_limit_bytes", vmem))
      return false;
    if (bkv.has_value() != bq.has_value()) {
      blocks_ok_ = false;
      if (reject(RuleId::block_sizes_partial, "num_kv_pages_per_block=" + opt_int(bkv) +
                                                  " and num_queries_per_block=" + opt_int(bq) +
                                                  " must be given together.") &&
          c_.done())
        return false;
    }
    if (vmem && *vmem > opt_.target.vmem_capacity_bytes) {
      blocks_ok_ = false;
      if (reject(RuleId::vmem_limit_over_capacity,
                 "vmem_limit_bytes=" + I(*vmem) + " must not exceed the " +
                     std::string(opt_.target.name) + " VMEM capacity of " +
                     I(opt_.target.vmem_capacity_bytes) + " bytes.") &&
          c_.done())
        return false;
    }
    return true;
  }

  // A block size or VMEM limit that is given must be positive. Returns false to stop.
  bool positive_block_param(RuleId id, const char* name, const std::optional<int64_t>& v) {
    if (!v || *v > 0) return true;
    blocks_ok_ = false;
    return !(reject(id, std::string(name) + "=" + I(*v) + " must be positive.") && c_.done());
  }

  bool finite_scalar(RuleId id, const char* name, const std::optional<double>& v) {
    return !(v && !finite_as_float32(*v) &&
             reject(id, std::string(name) + "=" + F(*v) + " must be finite as a float32.") &&
             c_.done());
  }

  int64_t kv_len(int64_t i) const { return in_.kv_lens.int_at(i); }
  int64_t cu(int64_t i) const { return in_.cu_q_lens.int_at(i); }

  // JAX's dynamic_validate_inputs on numpy inputs, step by step. Where JAX goes wrong
  // rather than raising (a float or bool num_seqs indexing cu_q_lens, a negative one
  // reading it from the end, page_size 0 dividing by zero in XLA without an error), the
  // crash rule is reported at the step where JAX crashes, or, where JAX carries on, only
  // after every check JAX still makes (deferred_).
  void jax_dynamic_rules() {
    const NumpyScalar ns = numpy_scalar(in_.num_seqs);
    if (ns.greater_than(N_)) {
      reject(RuleId::num_seqs_too_large,
             "num_seqs[0]=" + ns.repr + " must be less or equal to max_num_seqs=" + I(N_));
      return;
    }
    if (N_ == 0) {
      reject(RuleId::max_num_seqs_zero, "max_num_seqs=0 must be positive.");
      return;
    }
    // XLA's integer division by zero gives a negative page count instead of an error, so
    // with page_size 0 the check passes and JAX goes on.
    if (S_ == 0) {
      deferred_.push_back({RuleId::page_size_zero, "page_size=0 must be positive."});
    } else if (!pages_per_seq_rule(N_)) {
      return;
    }
    if (ns.kind == NumpyScalar::kFloat || ns.kind == NumpyScalar::kBool) {
      // cu_q_lens[num_seqs[0]]: a float index raises IndexError, a bool one selects a
      // mask whose truth value is ambiguous.
      reject(RuleId::num_seqs_dtype, "num_seqs.dtype=" + dtype_repr(in_.num_seqs.dtype()) +
                                         " must be int32.");
      return;
    }
    int64_t index = ns.value;
    if (index < 0) {
      const std::string message = "num_seqs[0]=" + ns.repr + " must be non-negative.";
      // A jax array index counts from the end and clamps below 0; the q_len loop below
      // then runs 0 times.
      index = std::max<int64_t>(index + N_ + 1, 0);
      deferred_.push_back({RuleId::num_seqs_negative, message});
    }
    if (!total_tokens_rule(cu(index))) return;
    for (int64_t i = 0; i < ns.value; ++i) {
      const int64_t q_len = wrap32(cu(i + 1) - cu(i));
      if (q_len > kv_len(i)) {
        reject(RuleId::q_len_exceeds_kv_len, "q_len=" + I(q_len) +
                                                 " must be less or equal to kv_len=" +
                                                 I(kv_len(i)) + " at sequence " + I(i) + ".");
        return;
      }
    }
  }

  // Sequence-level rules over the sequences in use; each return leaves the rest
  // unevaluable.
  void strict_dynamic_rules() {
    const int64_t ns = in_.num_seqs.int_at(0);
    if (ns > N_) {
      reject(RuleId::num_seqs_too_large,
             "num_seqs[0]=" + I(ns) + " must be less or equal to max_num_seqs=" + I(N_));
      return;
    }
    if (N_ == 0) {
      reject(RuleId::max_num_seqs_zero, "max_num_seqs=0 must be positive.");
      return;
    }
    if (pps_ == 0) {
      reject(RuleId::pages_per_seq_zero, "pages_per_seq=0 must be positive.");
      return;
    }
    if (S_ == 0) {
      reject(RuleId::page_size_zero, "page_size=0 must be positive.");
      return;
    }
    if (!pages_per_seq_rule(std::max<int64_t>(ns, 0))) return;
    if (!int32_block_rule(std::max<int64_t>(ns, 0))) return;
    if (ns < 0) {
      reject(RuleId::num_seqs_negative, "num_seqs[0]=" + I(ns) + " must be non-negative.");
      return;
    }
    if (!strict_sequence_rules(ns)) return;
    if (!total_tokens_rule(cu(ns))) return;
    for (int64_t i = 0; i < ns; ++i) {
      if (cu(i + 1) - cu(i) > kv_len(i)) {
        if (reject(RuleId::q_len_exceeds_kv_len,
                   "q_len=" + I(cu(i + 1) - cu(i)) + " must be less or equal to kv_len=" +
                       I(kv_len(i)) + " at sequence " + I(i) + ".") &&
            c_.done())
          return;
        break;
      }
    }
    page_index_rule(ns);
  }

  // cu_q_lens[num_seqs] rows must fit in q. Returns false to stop.
  bool total_tokens_rule(int64_t total) {
    return !(total > T_ &&
             reject(RuleId::total_q_tokens_too_large,
                    "Total q tokens " + I(total) +
                        " must be less or equal to max_num_batched_tokens=" + I(T_) + ".") &&
             c_.done());
  }

  // The first `used` kv_lens (JAX: all N, padding included, in int32 arithmetic; strict:
  // the sequences in use) must fit pages_per_seq pages of S tokens.
  bool pages_per_seq_rule(int64_t used) {
    if (used == 0) return true;
    int64_t max_kv_len = kv_len(0);
    for (int64_t i = 1; i < used; ++i) max_kv_len = std::max(max_kv_len, kv_len(i));
    const int64_t min_pages = c_.strict() ? ceil_div(std::max<int64_t>(max_kv_len, 0), S_)
                                          : wrap32(add_wrapping(max_kv_len, S_ - 1)) / S_;
    if (pps_ < min_pages) {
      reject(RuleId::pages_per_seq_too_small,
             "pages_per_seq=" + I(pps_) + " must be greater or equal to min_pages_per_seq=" +
                 I(min_pages) + " given max_kv_len=" + I(max_kv_len) + " and page_size=" +
                 I(S_) + ".");
      return false;
    }
    return true;
  }

  static int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

  bool strict_sequence_rules(int64_t ns) {
    if (cu(0) != 0 &&
        reject(RuleId::cu_q_lens_first_nonzero, "cu_q_lens[0]=" + I(cu(0)) + " must be 0.") &&
        c_.done())
      return false;
    bool ok = cu(0) == 0;
    for (int64_t i = 0; i < ns; ++i) {
      if (cu(i + 1) < cu(i)) {
        ok = false;
        if (reject(RuleId::cu_q_lens_decreasing,
                   "cu_q_lens[" + I(i + 1) + "]=" + I(cu(i + 1)) +
                       " must be greater or equal to cu_q_lens[" + I(i) + "]=" + I(cu(i)) +
                       " (q_len=" + I(cu(i + 1) - cu(i)) + " at sequence " + I(i) + ").") &&
            c_.done())
          return false;
        break;
      }
    }
    for (int64_t i = 0; i < ns; ++i) {
      if (kv_len(i) < 0) {
        ok = false;
        if (reject(RuleId::kv_len_negative, "kv_len=" + I(kv_len(i)) +
                                                " must be non-negative at sequence " + I(i) +
                                                ".") &&
            c_.done())
          return false;
        break;
      }
    }
    return ok;
  }

  // The KV block loop runs while kv_blk_idx * bkv * S < kv_len in int32, with the largest
  // bkv the kernel may use (the one given, else the default before any shrinking).
  bool int32_block_rule(int64_t ns) {
    const int64_t bkv = p_.num_kv_pages_per_block.value_or(std::min<int64_t>(pps_, 128));
    // A block size below 1 was rejected above (validate_all goes on): no block arithmetic.
    if (bkv < 1) return true;
    for (int64_t i = 0; i < ns; ++i) {
      const int64_t block_tokens = bkv > std::numeric_limits<int32_t>::max() / S_
                                       ? std::numeric_limits<int64_t>::max() / 2
                                       : bkv * S_;
      if (kv_len(i) + block_tokens - 1 > std::numeric_limits<int32_t>::max()) {
        reject(RuleId::kv_len_overflows_int32,
               "kv_len=" + I(kv_len(i)) + " at sequence " + I(i) + " with page_size=" + I(S_) +
                   " and num_kv_pages_per_block=" + I(bkv) +
                   " overflows the kernel's int32 block arithmetic.");
        return false;
      }
    }
    return true;
  }

  // Every page the sequences read, and page_indices[i, 0] of every sequence and of slot 0,
  // which the kernel's prefetch chain DMAs even when kv_len is 0.
  void page_index_rule(int64_t ns) {
    for (int64_t i = 0; i < std::max<int64_t>(ns, 1); ++i) {
      const int64_t read_pages = i < ns ? ceil_div(kv_len(i), S_) : 0;
      for (int64_t j = 0; j < std::max<int64_t>(read_pages, 1); ++j) {
        const int64_t page = in_.page_indices.int_at(i * pps_ + j);
        if (page < 0 || page >= P_) {
          const std::string why =
              read_pages > 0 ? "sequence " + I(i) + " reads " + I(read_pages) + " pages"
                             : "the kernel prefetches the first page of sequence slot " + I(i) +
                                   " even with nothing to read";
          reject(RuleId::page_index_out_of_range, "page_indices[" + I(i) + ", " + I(j) + "]=" +
                                                      I(page) + " must be in range [0, " + I(P_) +
                                                      ") (" + why + ").");
          return;  // one report is enough: the same row usually holds more
        }
      }
    }
  }

  bool sliding_window_too_large() {
    return p_.sliding_window && *p_.sliding_window > std::numeric_limits<int32_t>::max() &&
           reject(RuleId::sliding_window_too_large,
                  "sliding_window=" + I(*p_.sliding_window) + " must fit in int32.");
  }

  // jax mode, after every check JAX makes: where the Pallas kernel itself raises (TPU
  // interpret mode, DESIGN.md section 14), in the order it meets them: tracing the wrapper
  // and the kernel, then running it.
  void jax_pallas_rules() {
    const auto& bkv = p_.num_kv_pages_per_block;
    const auto& bq = p_.num_queries_per_block;
    const std::string no_rows =
        "max_num_batched_tokens=0 must be positive (the Pallas kernel reads a block of q";
    if (Hq_ == 0 && reject(RuleId::q_heads_zero, "num_q_heads=0 must be positive (the Pallas "
                                                 "kernel divides by its heads per block).") &&
        c_.done())
      return;
    // Without both block sizes JAX's default num_queries_per_block is min(T, 32) = 0.
    if (T_ == 0 && !(bkv && bq) &&
        reject(RuleId::max_num_batched_tokens_zero,
               no_rows + ", and its default num_queries_per_block would be 0).") &&
        c_.done())
      return;
    if (bkv && bq && *bq > std::numeric_limits<int32_t>::max() &&
        reject(RuleId::queries_per_block_too_large,
               "num_queries_per_block=" + I(*bq) + " must fit in int32.") &&
        c_.done())
      return;
    if (in_.kv_pages.dtype() == DType::kBool &&
        reject(RuleId::kv_dtype_unsupported,
               "kv_pages.dtype=dtype('bool') cannot be loaded by the Pallas kernel (its "
               "strided KV load bitcasts it, which lax.bitcast_convert_type refuses).") &&
        c_.done())
      return;
    if (!is_kernel_q_dtype(in_.q.dtype()) &&
        reject(RuleId::q_dtype_unsupported,
               "q.dtype=" + dtype_repr(in_.q.dtype()) + " must be float32 or bfloat16 for the "
               "Pallas kernel (fold_on_2nd_minor asserts it).") &&
        c_.done())
      return;
    // k_scale casts K to q's dtype, v_scale V: with one of them, K and V differ in dtype
    // unless the KV dtype is q's.
    if (p_.k_scale.has_value() != p_.v_scale.has_value() &&
        in_.kv_pages.dtype() != in_.q.dtype() &&
        reject(RuleId::kv_scales_one_sided,
               std::string(p_.k_scale ? "k_scale" : "v_scale") + " is set and " +
                   (p_.k_scale ? "v_scale" : "k_scale") + " is not: with kv_pages.dtype=" +
                   dtype_repr(in_.kv_pages.dtype()) + " and q.dtype=" + dtype_repr(in_.q.dtype()) +
                   " the Pallas kernel's K and V get different dtypes (it asserts k.dtype == "
                   "v.dtype).") &&
        c_.done())
      return;
    if (sliding_window_too_large() && c_.done()) return;
    if ((D_ == 0 || D_ % 128 != 0) &&
        reject(RuleId::head_dim_not_lane_multiple,
               "head_dim=" + I(D_) + " must be a positive multiple of 128 for the Pallas "
               "kernel (broadcast_to_shape asserts head_dim % 128 == 0).") &&
        c_.done())
      return;
    if (!c_.clean() || !program_inputs_ok()) return;
    if (T_ == 0) {  // both block sizes given: the q block read fails when running
      reject(RuleId::max_num_batched_tokens_zero, no_rows + ").");
      return;
    }
    if (pps_ == 0) {
      if (T_ > 0) {
        reject(RuleId::pages_per_seq_zero,
               "pages_per_seq=0 must be positive (the Pallas kernel DMAs page_indices[0, 0] "
               "for its first KV block).");
      }
      return;
    }
    const KernelPlan plan = plan_kernel(in_, p_, opt_.target, /*untuned_blocks=*/true);
    const int64_t ns = in_.num_seqs.int_at(0);
    constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
    if (plan.blocks.kv_pages_per_block > kInt32Max / S_) {
      reject(RuleId::kv_block_loop_wraps_int32,
             "num_kv_pages_per_block=" + I(plan.blocks.kv_pages_per_block) + " times page_size=" +
                 I(S_) + " must fit in int32: the Pallas kernel's KV loop multiplies by it "
                 "(OverflowError when tracing).");
      return;
    }
    const int64_t block_tokens = plan.blocks.kv_pages_per_block * S_;
    for (int64_t i = 0; i < ns; ++i) {
      if (kv_loop_wraps_int32(kv_len(i), block_tokens)) {
        reject(RuleId::kv_block_loop_wraps_int32,
               "kv_len=" + I(kv_len(i)) + " at sequence " + I(i) + ": the Pallas kernel's KV "
               "loop compares kv_blk * " + I(block_tokens) + " with kv_len in int32, which "
               "wraps before reaching it.");
        return;
      }
    }
    program_rules(plan);
  }

  // strict mode, last: where the Pallas kernel's own program computes a defined row from
  // data other than the definition's (findings 8 and 9).
  void strict_program_rules() {
    if (!c_.clean() || !program_inputs_ok() || pps_ == 0) return;
    program_rules(plan_kernel(in_, p_, opt_.target));
  }

  // The walk needs the index arrays as the kernel prefetches them and a heads plan.
  bool program_inputs_ok() const {
    if (!dynamic_ok_ || !heads_ok_ || N_ == 0 || S_ == 0 || Hq_ == 0) return false;
    if (in_.num_seqs.dtype() != DType::kInt32) return false;
    const int64_t ns = in_.num_seqs.int_at(0);
    if (ns < 0 || ns > N_) return false;
    const auto& bkv = p_.num_kv_pages_per_block;
    const auto& bq = p_.num_queries_per_block;
    if (bkv && bq && (*bkv < 1 || *bq < 1)) return false;
    return dtype_packing(in_.kv_pages.dtype()) != 0 && dtype_packing(in_.q.dtype()) != 0 &&
           min_heads_per_block(Hq_, Hc_, in_.q.dtype(), in_.kv_pages.dtype()).has_value();
  }

  void program_rules(const KernelPlan& plan) {
    const PallasGrid grid{.num_heads_blks = plan.num_heads_blks,
                          .num_q_blks = plan.num_q_blks,
                          .kv_pages_per_block = plan.blocks.kv_pages_per_block,
                          .queries_per_block = plan.blocks.queries_per_block};
    if (std::optional<Failure> f = pallas_program_failure(in_, grid, c_.mode(), kMaxWalkedSteps)) {
      reject(f->rule, std::move(f->message));
    }
  }

  void kernel_entry_rules() {
    if (!heads_ok_) return;
    const DType qt = in_.q.dtype();
    const DType kt = in_.kv_pages.dtype();
    // get_min_heads_per_blk divides by the KV packing, checks the KV tiling, and only then
    // divides by the q packing.
    auto packing_zero = [&](DType t) {
      reject(RuleId::dtype_packing_zero,
             "get_dtype_packing(" + dtype_repr(t) +
                 ") is 0: can_be_xla_fully_tiled raises ZeroDivisionError.");
    };
    if (dtype_packing(kt) == 0) return packing_zero(kt);
    if (!can_be_xla_fully_tiled(Hc_, dtype_packing(kt))) {
      reject(RuleId::heads_not_tileable, "Not implemented: num_combined_kv_heads=" + I(Hc_) +
                                             " can not be XLA fully tiled.");
      return;
    }
    if (dtype_packing(qt) == 0) return packing_zero(qt);
    const auto heads = min_heads_per_block(Hq_, Hc_, qt, kt);
    if (c_.done() || !c_.strict()) return;
    if (dtypes_ok_ && dims_ok_ && blocks_ok_ && S_ > 0 && !vmem_rule(*heads) && c_.done()) return;
    const int64_t smem = smem_need_bytes(N_, pps_);
    if (smem > opt_.target.smem_capacity_bytes) {
      reject(RuleId::smem_budget_exceeded,
             "the prefetched index arrays need " + I(smem) + " bytes of SMEM, more than the " +
                 std::string(opt_.target.name) + " capacity of " +
                 I(opt_.target.smem_capacity_bytes) + " bytes.");
    }
  }

  bool vmem_rule(const HeadsPerBlock& heads) {
    const VmemShape shape{.page_size = S_,
                          .head_dim = D_,
                          .q_heads_per_kv = Hq_ / Hkv_,
                          .heads = heads,
                          .q_dtype = in_.q.dtype(),
                          .kv_dtype = in_.kv_pages.dtype()};
    const int64_t limit =
        p_.vmem_limit_bytes.value_or(default_scoped_vmem_limit(opt_.target));
    const std::string limit_text =
        p_.vmem_limit_bytes ? "vmem_limit_bytes=" + I(limit)
                            : "the default scoped limit of " + I(limit) + " bytes";
    if (p_.num_kv_pages_per_block && p_.num_queries_per_block) {
      const BlockSizes b{*p_.num_kv_pages_per_block, *p_.num_queries_per_block};
      const int64_t need = vmem_need_bytes(shape, b);
      if (need <= limit) return true;
      reject(RuleId::vmem_budget_exceeded,
             "num_kv_pages_per_block=" + I(b.kv_pages_per_block) + " and num_queries_per_block=" +
                 I(b.queries_per_block) + " need " + I(need) + " bytes of VMEM, more than " +
                 limit_text + ".");
      return false;
    }
    if (default_block_sizes(shape, pps_, T_, limit)) return true;
    reject(RuleId::vmem_budget_exceeded,
           "no block sizes fit: num_kv_pages_per_block=1 and num_queries_per_block=1 need " +
               I(vmem_need_bytes(shape, BlockSizes{1, 1})) + " bytes of VMEM, more than " +
               limit_text + ".");
    return false;
  }

  bool reject(RuleId id, std::string message) { return c_.reject(id, std::move(message)); }

  const Inputs& in_;
  const Params& p_;
  const ValidateOptions& opt_;
  Checker& c_;
  int64_t T_ = 0, Hq_ = 0, D_ = 0, P_ = 0, S_ = 0, Hc_ = 0, Dk_ = 0, Hkv_ = 0, N_ = 0, pps_ = 0;
  bool heads_ok_ = true;         // Hc even, Hkv > 0, Hq divisible by Hkv
  bool dynamic_ok_ = true;       // index arrays have the shapes and dtypes dynamic rules read
  bool dtypes_ok_ = true;        // q and kv dtypes are ones the kernel computes with
  bool dims_ok_ = true;          // Hq, D >= 1
  bool blocks_ok_ = true;        // block sizes and vmem limit usable for the budget
  std::vector<Failure> deferred_;  // jax mode: crash rules JAX only trips over later
};

std::vector<Failure> run(const Inputs& in, const Params& params, const ValidateOptions& options,
                         bool first_only) {
  Checker checker(options.mode, first_only);
  Walk(in, params, options, checker).run();
  return checker.take();
}

}  // namespace

std::optional<Failure> validate(const Inputs& in, const Params& params,
                                const ValidateOptions& options) {
  std::vector<Failure> failures = run(in, params, options, /*first_only=*/true);
  if (failures.empty()) return std::nullopt;
  return std::move(failures.front());
}

std::vector<Failure> validate_all(const Inputs& in, const Params& params,
                                  const ValidateOptions& options) {
  return run(in, params, options, /*first_only=*/false);
}

}  // namespace rpa
