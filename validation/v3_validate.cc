#include "validation/v3_validate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/float32_scalar.h"
#include "core/jax_params.h"
#include "core/python_repr.h"
#include "core/v3_cache_layout.h"
#include "schedule/v3_program.h"

namespace rpa {
namespace {

// Python ints are exact; a few expected sizes (2 * Hkv, rows * packing) of hostile shapes
// pass INT64_MAX, so they are computed and printed in 128 bits.
__extension__ typedef __int128 PyInt;
__extension__ typedef unsigned __int128 PyUInt;

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

std::string I(int64_t v) { return py_int_repr(v); }
std::string F(double v) { return py_float_repr(v); }
std::string big(PyInt v) {
  if (v >= std::numeric_limits<int64_t>::min() && v <= std::numeric_limits<int64_t>::max()) {
    return I(static_cast<int64_t>(v));
  }
  const bool neg = v < 0;
  PyUInt u = neg ? static_cast<PyUInt>(-(v + 1)) + 1 : static_cast<PyUInt>(v);
  std::string s;
  while (u > 0) {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(u % 10)));
    u /= 10;
  }
  return neg ? "-" + s : s;
}

// The int32 jax arrays the dynamic checks compute with: sums and differences wrap.
int32_t wrap32(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }
std::string jax_scalar(int64_t v) { return jax_int32_repr(v); }
std::string jax_vector(const std::vector<int64_t>& v) { return jax_int32_vector_repr(v); }
// Python's % for a positive divisor: the result has the divisor's sign.
int64_t py_mod(int64_t a, int64_t b) {
  const int64_t r = a % b;
  return r < 0 ? r + b : r;
}
// floor division of int32 arrays (jnp.floor_divide), b > 0.
int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}
// a * b for a, b >= 0, saturated at INT64_MAX.
int64_t sat_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}
// a - b, saturated at INT64_MIN and INT64_MAX (a sliding window may be any int64 where its
// own rules already failed and every failure is reported).
int64_t sat_sub(int64_t a, int64_t b) {
  int64_t r = 0;
  if (!__builtin_sub_overflow(a, b, &r)) return r;
  return b < 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}
// a + b, saturated likewise.
int64_t sat_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}
bool finite_as_float32(double v) { return std::isfinite(static_cast<float>(v)); }
bool is_float8(DType t) { return t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2; }

// jnp.asarray with jax_enable_x64 off (vLLM's setting) turns 64-bit arrays into 32-bit ones:
// the dtype native mode sees. Strict mode judges the dtype the case holds.
DType native_dtype(DType t) {
  switch (t) {
    case DType::kInt64:
      return DType::kInt32;
    case DType::kUInt64:
      return DType::kUInt32;
    case DType::kFloat64:
      return DType::kFloat32;
    default:
      return t;
  }
}

class Walk {
 public:
  Walk(Dialect d, const V3Inputs& in, const V3Params& p, Mode m, bool first_only)
      : d_(d),
        in_(in),
        p_(p),
        m_(m),
        first_only_(first_only),
        hd64_(d == Dialect::kTpuInferenceV3Hd64) {}

  std::vector<V3Failure> run() {
    if (keywords() && shapes() && cache() && index_arrays() && options()) dynamic();
    return std::move(failures_);
  }

 private:
  bool strict() const { return m_ == Mode::kStrict; }
  DType dt(const Tensor& t) const { return strict() ? t.dtype() : native_dtype(t.dtype()); }
  std::string dtr(const Tensor& t) const { return dtype_repr(dt(t)); }
  // Records a failure of a rule the dialect and mode enforce; true when recorded.
  bool fail(V3RuleId id, std::string message) {
    if (!v3_rule_info(id).in(d_, m_)) return false;
    failures_.push_back(V3Failure{id, std::move(message)});
    return true;
  }
  bool done() const { return first_only_ && !failures_.empty(); }
  // fail() and report whether the walk must stop (first-only mode).
  bool stop(V3RuleId id, std::string message) { return fail(id, std::move(message)) && done(); }

  // A keyword or array of the other entry point: Python's TypeError at the call.
  bool keywords() {
    if (d_ == Dialect::kJax) {
      // No mode of the jax dialect enforces v3 rules, so this one is recorded directly.
      failures_.push_back(
          V3Failure{V3RuleId::keyword_not_in_dialect, "the jax dialect has no v3 rules"});
      return false;
    }
    const std::string fn = hd64_ ? "ragged_paged_attention_hd64()" : "ragged_paged_attention()";
    std::string bad;
    if (hd64_) {
      if (!p_.use_causal_mask)
        bad = "use_causal_mask";
      else if (!p_.update_kv_cache)
        bad = "update_kv_cache";
      else if (p_.skip_kv_mask)
        bad = "skip_kv_mask";
      else if (p_.out_dtype)
        bad = "out_dtype";
      else if (p_.d_block_sizes)
        bad = "d_block_sizes";
      else if (p_.p_block_sizes)
        bad = "p_block_sizes";
      else if (p_.m_block_sizes)
        bad = "m_block_sizes";
    } else if (in_.attention_sink) {
      fail(V3RuleId::keyword_not_in_dialect,
           "TypeError: " + fn + " takes 8 positional arguments but 9 were given");
      return false;
    } else if (p_.num_kv_pages_per_block) {
      bad = "num_kv_pages_per_block";
    } else if (p_.num_queries_per_block) {
      bad = "num_queries_per_block";
    }
    if (!bad.empty()) {
      fail(V3RuleId::keyword_not_in_dialect,
           "TypeError: " + fn + " got an unexpected keyword argument '" + bad + "'");
      return false;
    }
    return true;
  }

  bool shapes() {
    if (!hd64_ && p_.use_causal_mask && p_.skip_kv_mask &&
        stop(V3RuleId::causal_skip_kv_mask, "Can not skip kv mask when using causal mask."))
      return false;
    const Tensor& q = in_.queries;
    const Tensor& k = in_.keys;
    const Tensor& v = in_.values;
    if (q.rank() != 3 || k.rank() != 3 || v.rank() != 3) {
      fail(V3RuleId::qkv_rank, "Expected 3D array for q.shape=" + shape_repr(q.shape()) +
                                   ", k.shape=" + shape_repr(k.shape()) +
                                   ", v.shape=" + shape_repr(v.shape()));
      return false;
    }
    if (k.shape() != v.shape() &&
        stop(V3RuleId::kv_shape_mismatch, "Expected k.shape=" + shape_repr(k.shape()) +
                                              " to be equal to v.shape=" + shape_repr(v.shape())))
      return false;
    if (!(q.dim(0) == k.dim(0) && k.dim(0) == v.dim(0)) &&
        stop(V3RuleId::num_tokens_mismatch, "Expected q.shape[0]=" + I(q.dim(0)) +
                                                " to be equal to k.shape[0]=" + I(k.dim(0)) +
                                                " and v.shape[0]=" + I(v.dim(0))))
      return false;
    if (!(q.dim(2) == k.dim(2) && k.dim(2) == v.dim(2)) &&
        stop(V3RuleId::head_dim_mismatch, "Expected q.shape[2]=" + I(q.dim(2)) +
                                              " to be equal to k.shape[2]=" + I(k.dim(2)) +
                                              " and v.shape[2]=" + I(v.dim(2))))
      return false;
    T_ = q.dim(0);
    Hq_ = q.dim(1);
    D_ = q.dim(2);
    Hkv_ = k.dim(1);
    if (hd64_ && in_.attention_sink && !sink()) return false;
    if (hd64_ && D_ != 64 &&
        stop(V3RuleId::head_dim_not_64, "Expected actual_head_dim=" + I(D_) + " to be 64."))
      return false;
    if (Hkv_ == 0) {
      fail(V3RuleId::kv_heads_zero, strict() ? "num_kv_heads=0 must be positive."
                                             : "ZeroDivisionError: integer modulo by zero");
      return false;
    }
    if (Hq_ % Hkv_ != 0 && stop(V3RuleId::heads_not_divisible,
                                "Expected actual_num_q_heads=" + I(Hq_) +
                                    " to be divisible by actual_num_kv_heads=" + I(Hkv_) + "."))
      return false;
    return true;
  }

  bool sink() {
    const Tensor& s = *in_.attention_sink;
    if (strict() ? s.rank() != 1 : s.rank() == 0) {
      fail(V3RuleId::sink_rank, strict() ? "attention_sink.shape=" + shape_repr(s.shape()) +
                                               " must be (" + I(Hq_) + ",)."
                                         : "IndexError: tuple index out of range");
      if (s.rank() == 0 || done()) return false;
    }
    sink_ok_ = s.rank() == 1;
    if (s.dim(0) != Hq_) {
      sink_ok_ = false;
      if (stop(V3RuleId::sink_shape, "Expected attention_sink.shape[0]=" + I(s.dim(0)) +
                                         " to be equal to q.shape[1]=" + I(Hq_) +
                                         " (num_q_heads)."))
        return false;
    }
    if (dt(s) != DType::kFloat32) {
      sink_ok_ = false;
      if (stop(V3RuleId::sink_dtype, "Expected attention_sink.dtype=" + dtr(s) +
                                         " to be equal to jnp.float32=<class "
                                         "'jax.numpy.float32'>."))
        return false;
    }
    return true;
  }

  bool cache() {
    const Tensor& c = in_.kv_cache;
    const DType kv = dt(c);
    if (strict()) {
      const bool supported = kv == DType::kFloat32 || kv == DType::kBFloat16 || is_float8(kv);
      if (!supported) {
        fail(V3RuleId::kv_dtype_unsupported,
             "kv_cache.dtype=" + dtr(c) +
                 " must be float32, bfloat16, float8_e4m3fn or float8_e5m2.");
        // 32 / bits is 0 for 64-bit types: no layout to check against.
        if (done() || v3_kv_packing(kv) == 0) return false;
      }
      const DType q = dt(in_.queries);
      const bool q_ok = q == DType::kFloat32 || q == DType::kBFloat16;
      if (supported && q_ok && q != kv && !is_float8(kv) &&
          stop(V3RuleId::dtype_pair, "q.dtype=" + dtr(in_.queries) +
                                         " with kv_cache.dtype=" + dtr(c) +
                                         ": q and KV must share a dtype unless KV is "
                                         "float8."))
        return false;
    }
    const int64_t P = v3_kv_packing(kv);  // > 0: native dtypes are at most 32 bits
    if (!hd64_) {
      if (c.rank() < 2 || (strict() && c.rank() != 5)) {
        fail(V3RuleId::kv_cache_rank,
             strict() ? "kv_cache.shape=" + shape_repr(c.shape()) + " must have rank 5."
                      : "IndexError: tuple index out of range");
        return false;
      }
      const PyInt rows = (PyInt{2} * Hkv_ + P - 1) / P;
      const PyInt lanes = (PyInt{D_} + 127) / 128 * 128;
      const bool same = c.rank() == 5 && c.dim(2) == rows && c.dim(3) == P && c.dim(4) == lanes;
      if (!same) {
        fail(V3RuleId::kv_cache_shape, "Expected kv_cache.shape=" + shape_repr(c.shape()) +
                                           " to be equal to expected_kv_cache_shape=(" +
                                           I(c.dim(0)) + ", " + I(c.dim(1)) + ", " + big(rows) +
                                           ", " + I(P) + ", " + big(lanes) + ")");
        return false;
      }
    } else {
      if (c.rank() != 5) {
        std::string m = "kv_cache.shape=" + shape_repr(c.shape()) + " must have rank 5.";
        if (!strict()) {
          m = c.rank() < 5 ? "ValueError: not enough values to unpack (expected 5, got " +
                                 std::to_string(c.rank()) + ")"
                           : "ValueError: too many values to unpack (expected 5)";
        }
        fail(V3RuleId::kv_cache_rank, std::move(m));
        return false;
      }
      if (c.dim(4) != 128 &&
          stop(V3RuleId::kv_cache_last_dim,
               "Expected actual_head_dim_x2=" + I(c.dim(4)) + " is equal to 128"))
        return false;
    }
    const Tensor& k = in_.keys;
    const Tensor& v = in_.values;
    if (!(kv == dt(k) && dt(k) == dt(v)) &&
        stop(V3RuleId::kv_dtype_mismatch, "Expected kv_cache.dtype=" + dtr(c) +
                                              " to be equal to k.dtype=" + dtr(k) +
                                              " and v.dtype=" + dtr(v) + "."))
      return false;
    if (!dtype_is_float(kv) &&
        stop(V3RuleId::kv_dtype_not_float,
             "Expected kv_cache.dtype=" + dtr(c) + " to be a floating point."))
      return false;
    if (hd64_) {
      if (c.dim(3) != P) {
        fail(V3RuleId::kv_packing_mismatch,
             "kv_packing=" + I(c.dim(3)) + " does not match with kv_cache.dtype=" + dtr(c));
        return false;
      }
      const PyInt heads = PyInt{c.dim(2)} * P;
      const PyInt want = (PyInt{Hkv_} + P - 1) / P * P;
      if (heads != want && stop(V3RuleId::kv_cache_heads, "Invalid num_kv_heads=" + big(heads) +
                                                              ", actual_num_kv_heads=" + I(Hkv_) +
                                                              ", kv_packing=" + I(P)))
        return false;
    }
    pages_ = c.dim(0);
    ps_ = c.dim(1);
    P_ = P;
    return true;
  }

  bool index_arrays() {
    const Tensor& kl = in_.kv_lens;
    const Tensor& pi = in_.page_indices;
    const Tensor& cu = in_.cu_q_lens;
    const Tensor& di = in_.distribution;
    const DType i32 = DType::kInt32;
    if (!(dt(kl) == i32 && dt(pi) == i32 && dt(cu) == i32 && dt(di) == i32)) {
      dynamic_ok_ = false;
      if (stop(V3RuleId::index_dtype, "Expected int32 dtype for kv_lens.dtype=" + dtr(kl) +
                                          ", page_indices.dtype=" + dtr(pi) + ", cu_q_lens.dtype=" +
                                          dtr(cu) + ", distribution.dtype=" + dtr(di)))
        return false;
    }
    if (kl.rank() != 1 || pi.rank() != 1 || cu.rank() != 1) {
      fail(V3RuleId::index_rank, "Expected 1D array for kv_lens.shape=" + shape_repr(kl.shape()) +
                                     ", page_indices.shape=" + shape_repr(pi.shape()) +
                                     ", cu_q_lens.shape=" + shape_repr(cu.shape()));
      return false;
    }
    N_ = kl.dim(0);
    if (N_ == 0) {
      fail(V3RuleId::max_num_seqs_zero, strict() ? "max_num_seqs=0 must be positive."
                                                 : "ZeroDivisionError: integer modulo by zero");
      return false;
    }
    const int64_t npi = pi.dim(0);
    if (npi % N_ != 0) {
      dynamic_ok_ = false;
      if (stop(V3RuleId::page_indices_not_divisible,
               "Expected num_page_indices=" + I(npi) + " to be divisible by max_num_seqs=" + I(N_) +
                   "."))
        return false;
    }
    pps_ = npi / N_;
    if (cu.shape() != Shape{N_ + 1}) {  // N_ + 1 cannot overflow: kv_lens holds N_ elements
      dynamic_ok_ = false;
      if (stop(V3RuleId::cu_q_lens_shape, "Expected cu_q_lens.shape=" + shape_repr(cu.shape()) +
                                              " to be (" + I(N_ + 1) + ",)."))
        return false;
    }
    if (di.shape() != Shape{3}) {
      dynamic_ok_ = false;
      if (stop(V3RuleId::distribution_shape,
               "Expected distribution.shape=" + shape_repr(di.shape()) + " to be (3,)."))
        return false;
    }
    return true;
  }

  bool options() {
    if (ps_ % P_ != 0 &&
        stop(V3RuleId::page_size_packing,
             "page_size=" + I(ps_) + " must be divisible by kv_packing=" + I(P_) + "."))
      return false;
    if (p_.sliding_window && *p_.sliding_window <= 0 &&
        stop(V3RuleId::sliding_window_nonpositive,
             "sliding_window=" + I(*p_.sliding_window) + " must be positive."))
      return false;
    if (p_.soft_cap && *p_.soft_cap == 0.0 &&
        stop(V3RuleId::soft_cap_zero, "soft_cap=" + F(*p_.soft_cap) + " must not be 0.0."))
      return false;
    // strict: the kernels divide by the cap as a float32 (float32_scalar), where one below
    // 2^-126 is 0 or a subnormal a TPU (and rpa's kernel) flushes to 0: 0 / 0 on a logit of 0.
    if (strict() && p_.soft_cap && *p_.soft_cap != 0.0 && float32_scalar(*p_.soft_cap) == 0.0f &&
        stop(V3RuleId::soft_cap_zero, soft_cap_flushed_message(*p_.soft_cap)))
      return false;
    if (p_.chunk_prefill_size && *p_.chunk_prefill_size <= 0 &&
        stop(V3RuleId::chunk_prefill_nonpositive,
             "chunk_prefill_size=" + I(*p_.chunk_prefill_size) + " must be positive."))
      return false;
    // Strict names page_size 0 once, before the block tuples divide by it.
    if (strict() && ps_ == 0) {
      if (stop(V3RuleId::page_size_zero, "page_size=0 must be positive.")) return false;
    }
    if (!hd64_) {
      const std::pair<const char*, const std::optional<V3BlockSizes>*> tuples[] = {
          {"decode", &p_.d_block_sizes},
          {"prefill", &p_.p_block_sizes},
          {"mixed", &p_.m_block_sizes}};
      for (const auto& [prefix, sizes] : tuples) {
        if (*sizes && !block_tuple(prefix, **sizes)) return false;
      }
    } else {
      if (p_.num_kv_pages_per_block && *p_.num_kv_pages_per_block <= 0 &&
          stop(V3RuleId::kv_pages_per_block_nonpositive,
               "num_kv_pages_per_block=" + I(*p_.num_kv_pages_per_block) + " must be positive."))
        return false;
      if (p_.num_queries_per_block && *p_.num_queries_per_block <= 0 &&
          stop(V3RuleId::queries_per_block_nonpositive,
               "num_queries_per_block=" + I(*p_.num_queries_per_block) + " must be positive."))
        return false;
    }
    if (p_.vmem_limit_bytes && *p_.vmem_limit_bytes <= 0 &&
        stop(V3RuleId::vmem_limit_nonpositive,
             "vmem_limit_bytes=" + I(*p_.vmem_limit_bytes) + " must be positive."))
      return false;
    return strict() ? strict_options() : true;
  }

  // kernel.py's _validate_block_sizes for one tuple; false when the walk must stop.
  bool block_tuple(const std::string& prefix, const V3BlockSizes& b) {
    const auto [bq, bkv, bq_c, bkv_c] = b;
    if (!(0 < bq_c && py_mod(bq, bq_c) == 0)) {
      return !stop(V3RuleId::block_bq_sizes,
                   prefix + " bq_csz=" + I(bq_c) + " and bq_sz=" + I(bq) +
                       " must satisfy (0 < bq_csz and bq_sz % bq_csz == 0).");
    }
    if (!(0 < bkv_c && py_mod(bkv, bkv_c) == 0)) {
      return !stop(V3RuleId::block_bkv_sizes,
                   prefix + " bkv_csz=" + I(bkv_c) + " and bkv_sz=" + I(bkv) +
                       " must satisfy (0 < bkv_csz and bkv_sz % bkv_csz == 0).");
    }
    if (ps_ == 0) {
      if (strict()) return true;  // reported once above
      fail(V3RuleId::page_size_zero, "ZeroDivisionError: integer modulo by zero");
      return false;
    }
    if (py_mod(bkv, ps_) != 0) {
      return !stop(V3RuleId::block_bkv_page, prefix + " bkv_sz=" + I(bkv) +
                                                 " must be divisible by page_size=" + I(ps_) + ".");
    }
    if (py_mod(bkv_c, ps_) != 0) {
      return !stop(
          V3RuleId::block_bkv_csz_page,
          prefix + " bkv_csz=" + I(bkv_c) + " must be divisible by page_size=" + I(ps_) + ".");
    }
    return true;
  }

  bool strict_options() {
    if (Hq_ == 0 && stop(V3RuleId::q_heads_zero, "num_q_heads=0 must be positive.")) return false;
    if (D_ == 0 && stop(V3RuleId::head_dim_zero, "head_dim=0 must be positive.")) return false;
    if (!hd64_) {
      const std::pair<const char*, const std::optional<V3BlockSizes>*> tuples[] = {
          {"decode", &p_.d_block_sizes},
          {"prefill", &p_.p_block_sizes},
          {"mixed", &p_.m_block_sizes}};
      for (const auto& [prefix, sizes] : tuples) {
        if (*sizes && ((**sizes)[0] < 1 || (**sizes)[1] < 1) &&
            stop(V3RuleId::block_size_nonpositive,
                 std::string(prefix) + " bq_sz=" + I((**sizes)[0]) +
                     " and bkv_sz=" + I((**sizes)[1]) + " must be positive."))
          return false;
      }
    }
    if (p_.sliding_window && *p_.sliding_window > kInt32Max &&
        stop(V3RuleId::sliding_window_too_large,
             "sliding_window=" + I(*p_.sliding_window) + " must fit in int32."))
      return false;
    const auto finite = [&](V3RuleId id, const char* name, const std::optional<double>& v) {
      return v && !finite_as_float32(*v) &&
             stop(id, std::string(name) + "=" + F(*v) + " must be finite as a float32.");
    };
    if (finite(V3RuleId::soft_cap_nonfinite, "soft_cap", p_.soft_cap)) return false;
    if (finite(V3RuleId::sm_scale_nonfinite, "sm_scale", p_.sm_scale)) return false;
    // q is divided by q_scale in q's dtype: a float32 subnormal there is 0 to a TPU (and to
    // float32_scalar), so q / q_scale is inf or 0 / 0 = NaN (fuzz_raw_inputs found 7e-40).
    if (p_.q_scale && (!finite_as_float32(*p_.q_scale) || float32_scalar(*p_.q_scale) == 0) &&
        stop(V3RuleId::q_scale_invalid, "q_scale=" + F(*p_.q_scale) +
                                            " must be finite, nonzero and not subnormal as a "
                                            "float32."))
      return false;
    if (finite(V3RuleId::k_scale_nonfinite, "k_scale", p_.k_scale)) return false;
    if (finite(V3RuleId::v_scale_nonfinite, "v_scale", p_.v_scale)) return false;
    if (finite(V3RuleId::mask_value_nonfinite, "mask_value", p_.mask_value)) return false;
    // A slot past kv_len (or a fully masked block) holds exactly mask_value; at or below
    // -1e30 its weight exp(mask_value - m) is 0 in float32 against any logit below 1e29.
    if (p_.mask_value && finite_as_float32(*p_.mask_value) && *p_.mask_value > kMaxExactMaskValue &&
        stop(V3RuleId::mask_value_too_large,
             "mask_value=" + F(*p_.mask_value) + " must be at most -1e+30."))
      return false;
    if (hd64_ && in_.attention_sink && sink_ok_) {
      const Tensor& s = *in_.attention_sink;
      for (int64_t h = 0; h < s.numel(); ++h) {
        const double x = s.float_at(h);
        if ((std::isnan(x) || x == std::numeric_limits<double>::infinity()) &&
            stop(V3RuleId::sink_nonfinite,
                 "attention_sink[" + I(h) + "]=" + F(x) + " must not be NaN or +inf."))
          return false;
      }
    }
    return true;
  }

  // An index array element as the rules see it: int32 (native wraps int64 as jnp.asarray).
  int64_t at(const Tensor& t, int64_t i) const { return wrap32(t.int_at(i)); }

  const std::optional<V3BlockSizes>& pass_blocks(int64_t seq) const {
    if (seq < d0_) return p_.d_block_sizes;
    if (seq < d1_ && p_.chunk_prefill_size) return p_.p_block_sizes;
    return p_.m_block_sizes;
  }

  void dynamic() {
    if (!dynamic_ok_) return;
    const Tensor& di = in_.distribution;
    const Tensor& cu = in_.cu_q_lens;
    const Tensor& kl = in_.kv_lens;
    const Tensor& pi = in_.page_indices;
    d0_ = at(di, 0);
    d1_ = at(di, 1);
    const int64_t k = at(di, 2);
    if (!(d0_ <= d1_ && d1_ <= k)) {
      fail(V3RuleId::distribution_order,
           "Invalid distribution: distribution=" + jax_vector({d0_, d1_, k}));
      return;
    }
    if (k > N_) {
      fail(V3RuleId::num_seqs_too_large, "num_seqs=" + I(k) + " must be <= max_num_seqs=" + I(N_));
      return;
    }
    if (strict() && d0_ < 0) {
      fail(V3RuleId::distribution_negative,
           "distribution=(" + I(d0_) + ", " + I(d1_) + ", " + I(k) + ") must be non-negative.");
      return;
    }
    if (strict() && !hd64_ && d0_ < d1_ && !p_.chunk_prefill_size &&
        stop(V3RuleId::prefill_without_chunk_size,
             "sequences [" + I(d0_) + ", " + I(d1_) +
                 ") are in the prefill range, which kernel.py runs only with "
                 "chunk_prefill_size."))
      return;
    if (strict() && k > 0) {
      if (at(cu, 0) != 0 &&
          stop(V3RuleId::cu_q_lens_first_nonzero, "cu_q_lens[0]=" + I(at(cu, 0)) + " must be 0."))
        return;
      for (int64_t s = 0; s < k; ++s) {
        if (at(cu, s + 1) < at(cu, s)) {
          fail(V3RuleId::cu_q_lens_decreasing, "cu_q_lens[" + I(s + 1) + "]=" + I(at(cu, s + 1)) +
                                                   " must be >= cu_q_lens[" + I(s) +
                                                   "]=" + I(at(cu, s)) + ".");
          return;
        }
      }
    }
    // cu_q_lens[k] on a jax array: a negative index counts from the end, then clamps.
    const int64_t idx = std::clamp<int64_t>(k < 0 ? k + N_ + 1 : k, 0, N_);
    const int64_t total = at(cu, idx);
    if (total > T_) {
      fail(V3RuleId::total_q_tokens_too_large,
           "Total q tokens " + I(total) + " must be <= max_num_tokens=" + I(T_) + ".");
      return;
    }
    for (int64_t i = 0; i < k; ++i) {
      if (!sequence(i, at(cu, i + 1), at(cu, i), at(kl, i), pi) || done()) return;
    }
    if (strict() && !update_pages_private(k, cu, kl, pi)) return;
    kernel_rules();
  }

  // Strict: a page that a sequence's fused update writes is mapped by no other page slot, of
  // another sequence or of the same one. tpu-inference updates and attends one sequence at a
  // time (its reference, and its kernel's loop over sequences), and its reference attends
  // over its own gathered copy of the sequence's pages: through a page mapped twice, what a
  // row reads depends on whether (and in which order) the other slot's new tokens are written,
  // while the definition (DESIGN.md section 16) writes every update first. Pages that are
  // only read may be shared (a common prefix). Precondition: the per-sequence rules passed
  // (0 <= i < k <= N, pages in range).
  bool update_pages_private(int64_t k, const Tensor& cu, const Tensor& kl, const Tensor& pi) {
    if (!hd64_ && !p_.update_kv_cache) return true;
    struct Slot {
      int64_t seq = -1, slot = -1;
    };
    struct Mappings {
      Slot first, second;  // the first two (sequence, page slot) pairs that map the page
    };
    std::unordered_map<int64_t, Mappings> maps;
    int64_t mapped = 0;  // page slots in use: at most this many pages (a production call: ~10^4)
    for (int64_t i = 0; i < k; ++i) mapped += (at(kl, i) + ps_ - 1) / ps_;
    maps.reserve(static_cast<size_t>(mapped));
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t p = 0; p * ps_ < at(kl, i); ++p) {
        Mappings& m = maps[at(pi, i * pps_ + p)];
        if (m.first.seq < 0) {
          m.first = {i, p};
        } else if (m.second.seq < 0) {
          m.second = {i, p};
        }
      }
    }
    for (int64_t i = 0; i < k; ++i) {
      const int64_t kv_len = at(kl, i), first_new = kv_len - (at(cu, i + 1) - at(cu, i));
      for (int64_t p = first_new / ps_; p * ps_ < kv_len; ++p) {
        const int64_t page = at(pi, i * pps_ + p);
        const Mappings& m = maps[page];
        if (m.second.seq < 0) continue;
        const Slot other = m.first.seq == i && m.first.slot == p ? m.second : m.first;
        fail(V3RuleId::update_page_shared,
             "page " + I(page) + " receives new tokens of sequence " + I(i) + " (page slot " +
                 I(p) + ") and is also page slot " + I(other.slot) + " of sequence " +
                 I(other.seq) + ".");
        return false;
      }
    }
    return true;
  }

  // The per-sequence rules of sequence i; false when the walk must stop.
  bool sequence(int64_t i, int64_t cu_end, int64_t cu_start, int64_t kv_len, const Tensor& pi) {
    // Native computes q_len in int32 (wraps); strict has checked cu_q_lens is non-decreasing.
    const int64_t q_len = strict() ? cu_end - cu_start : wrap32(cu_end - cu_start);
    // Built only for a failure's message (this runs per sequence, up to 512 times a call).
    const auto where_kv = [&] {
      return " where kv_len=" + jax_scalar(kv_len) + " and page_size=" + I(ps_) + ".";
    };
    if (!(0 < q_len && q_len <= kv_len)) {
      fail(V3RuleId::q_len_range, "Require 0 < q_len=" + jax_scalar(q_len) + " <= kv_len=" +
                                      jax_scalar(kv_len) + " at sequence " + I(i) + ".");
      return false;
    }
    if (strict() && i < d0_ && q_len != 1 &&
        stop(V3RuleId::decode_q_len_not_one,
             "sequence " + I(i) + " is in the decode range, so q_len=" + I(q_len) + " must be 1."))
      return false;
    if (strict() && d0_ <= i && i < d1_ && p_.chunk_prefill_size &&
        q_len != *p_.chunk_prefill_size &&
        stop(V3RuleId::prefill_q_len_not_chunk,
             "sequence " + I(i) + " is in the prefill range, so q_len=" + I(q_len) +
                 " must be chunk_prefill_size=" + I(*p_.chunk_prefill_size) + "."))
      return false;
    if (ps_ == 0) {  // strict reported page_size_zero with the options
      if (!strict()) fail(V3RuleId::page_size_zero, "AssertionError");
      return false;
    }
    // cdiv(kv_len, page_size) on an int32 array: kv_len + page_size - 1 wraps in native.
    // (kv_len > 0 here.) A page_size past int32 would make JAX raise OverflowError; it is
    // wrapped like a sum instead (a hostile shape only: such a cache holds no element).
    const int64_t page_cnt =
        strict() ? (kv_len - 1) / ps_ + 1
                 : floor_div(wrap32(static_cast<int64_t>(static_cast<uint64_t>(kv_len) +
                                                         static_cast<uint64_t>(ps_) - 1)),
                             ps_);
    if (page_cnt > pps_) {
      fail(V3RuleId::page_count_too_large, "Require page_cnt=" + jax_scalar(page_cnt) +
                                               " <= pages_per_seq=" + I(pps_) + " at sequence " +
                                               I(i) + where_kv());
      return false;
    }
    for (int64_t p = 0; p < page_cnt; ++p) {
      const int64_t page = at(pi, i * pps_ + p);
      if (!(0 <= page && page < pages_)) {
        fail(V3RuleId::page_index_out_of_range, "Require 0 <= page_idx=" + jax_scalar(page) +
                                                    " < total_num_pages=" + I(pages_) +
                                                    " at sequence " + I(i) + where_kv());
        return false;
      }
    }
    if (!strict()) return true;
    // The kernel's kv block ends and positions run in int32: the largest kv block in force.
    const std::optional<V3BlockSizes>& blocks = hd64_ ? no_blocks_ : pass_blocks(i);
    // Without block sizes: the defaults never exceed pages_per_seq * page_size plus a page.
    int64_t bkv = sat_mul(ps_, pps_ + 1);
    if (blocks) bkv = (*blocks)[1];
    if (hd64_ && p_.num_kv_pages_per_block) bkv = sat_mul(*p_.num_kv_pages_per_block, ps_);
    bkv = std::max<int64_t>(bkv, 1);
    if (kv_len > kInt32Max - bkv + 1 &&
        stop(V3RuleId::kv_len_overflows_int32, "kv_len=" + I(kv_len) + " at sequence " + I(i) +
                                                   ": kv_len + " + I(bkv) +
                                                   " - 1 must fit in int32."))
      return false;
    if (!hd64_ && p_.skip_kv_mask) {
      const char* pass = i < d0_ ? "d" : (i < d1_ && p_.chunk_prefill_size ? "p" : "m");
      if (!blocks) {
        fail(V3RuleId::skip_kv_mask_block_unknown,
             "skip_kv_mask needs " + std::string(pass) + "_block_sizes: sequence " + I(i) +
                 "'s kv_len must be a multiple of its bkv_csz.");
        return false;
      }
      const int64_t csz = (*blocks)[3];
      if (csz > 0 && kv_len % csz != 0 &&
          stop(V3RuleId::skip_kv_mask_kv_len, "skip_kv_mask: kv_len=" + I(kv_len) +
                                                  " at sequence " + I(i) +
                                                  " must be a multiple of bkv_csz=" + I(csz) + "."))
        return false;
    }
    if (!hd64_ && p_.sliding_window && p_.mask_value) {
      if (std::optional<std::string> why = masked_block_overflow(i, q_len, kv_len)) {
        if (stop(V3RuleId::masked_block_overflows, *why)) return false;
      }
    }
    if (!hd64_ && p_.sliding_window && p_.update_kv_cache) {
      if (std::optional<std::string> why = window_skips_cache_write(i, q_len, kv_len)) {
        if (stop(V3RuleId::window_skips_cache_write, *why)) return false;
      }
    }
    if (!hd64_ && p_.sliding_window) {
      if (std::optional<std::string> why = window_int16_wraps(i, kv_len)) {
        if (stop(V3RuleId::window_int16_wraps, *why)) return false;
      }
      if (std::optional<std::string> why = window_int32_wraps(i, kv_len)) {
        if (stop(V3RuleId::window_int32_wraps, *why)) return false;
      }
    }
    return true;
  }

  // Finding 25 (measured in TPU interpret mode: corpus/findings/v3_window_int16_wraps.npz).
  // On TPU v6 and later kernel.py holds its mask positions in int16 when q is packed (bfloat16,
  // the only packed q strict takes) and pages_per_seq * page_size <= 32767, and tests
  // `q_span < k_span + sliding_window` there: the sum wraps mod 2^16, and so does a window
  // past int16 (JAX 0.11 converts the Python int by wrapping; it traces). The definition keeps
  // key t for the row at position q when t <= q (any t < kv_len without the causal mask) and
  // q - t < W. With W <= 32767 the kernel masks every such t with t + W >= 32768, and the last
  // row (q = kv_len - 1) keeps t = kv_len - 1. With W >= 32768 the definition keeps every key
  // and the kernel keeps key t iff q < int16(t + c), c = W mod 2^16: for all of them iff
  // kv_len <= c and c + kv_len - 1 <= 32767. The int16 positions are TPU v6's and later's
  // whatever the block sizes, so strict rejects on every generation.
  std::optional<std::string> window_int16_wraps(int64_t i, int64_t kv_len) const {
    if (dt(in_.queries) != DType::kBFloat16 || sat_mul(pps_, ps_) > 32767) return std::nullopt;
    const int64_t w = *p_.sliding_window, c = w % 65536;
    if (w < 1 || kv_len < 1) return std::nullopt;
    const bool from_zero = c >= 32768 || (w >= 32768 && c < kv_len);
    if (!from_zero && c + kv_len - 1 < 32768) return std::nullopt;
    const int64_t lost = from_zero ? 0 : 32768 - c;  // the last row's first masked key
    return "sequence " + I(i) + " (kv_len=" + I(kv_len) + ") under sliding_window=" + I(w) +
           ": kernel.py on TPU v6 and later holds mask positions in int16 (bfloat16 q, "
           "pages_per_seq * page_size = " + I(pps_ * ps_) + " <= 32767), where key + "
           "sliding_window wraps past 32767: the row at position " + I(kv_len - 1) +
           " loses key " + I(lost) + ", which the definition keeps.";
  }

  // Finding 26 (measured in TPU interpret mode: corpus/findings/v3_window_int32_wraps.npz).
  // Where its mask positions are int32 (every generation's float32 q; bfloat16 q on TPU v5 or
  // past pages_per_seq * page_size 32767), kernel.py's test `q_span < k_span + sliding_window`
  // wraps where key + W > 2147483647: the key is masked although the definition keeps it (W
  // fits int32 by sliding_window_too_large, so q - t < W always holds). The last row (position
  // kv_len - 1) keeps key kv_len - 1 under any causal mask, so a sequence departs iff
  // kv_len - 1 + W > 2147483647. Strict rejects on every generation (checked after
  // window_int16_wraps, which takes every such bfloat16 call that may run with int16 positions).
  std::optional<std::string> window_int32_wraps(int64_t i, int64_t kv_len) const {
    const int64_t w = *p_.sliding_window;
    // Native mode reaches here with any int64 window (sliding_window_too_large is strict's).
    if (w < 1 || kv_len < 1 || w <= kInt32Max - (kv_len - 1)) return std::nullopt;
    return "sequence " + I(i) + " (kv_len=" + I(kv_len) + ") under sliding_window=" + I(w) +
           ": kernel.py adds the window to int32 key positions, where key + sliding_window "
           "wraps past 2147483647: the row at position " + I(kv_len - 1) + " loses key " +
           I(kInt32Max + 1 - w) + ", which the definition keeps.";
  }

  // Sequence i's pass in kernel.py: its static q_len (decode 1, prefill chunk_prefill_size)
  // and the block tuples it may run with: its own, else each TPU generation's defaults, with
  // the words that say which.
  struct PassBlocks {
    std::optional<int64_t> static_q_len;
    std::vector<std::pair<V3BlockSizes, std::string>> candidates;
  };
  PassBlocks pass_blocks_of(int64_t i) const {
    const V3Pass pass = i < d0_ ? V3Pass::kDecode : (i < d1_ ? V3Pass::kPrefill : V3Pass::kMixed);
    PassBlocks b;
    b.static_q_len = pass == V3Pass::kDecode ? std::optional<int64_t>(1)
                                             : (pass == V3Pass::kPrefill ? p_.chunk_prefill_size
                                                                         : std::nullopt);
    const char* letter = pass == V3Pass::kDecode ? "d" : (pass == V3Pass::kPrefill ? "p" : "m");
    if (const std::optional<V3BlockSizes>& given = pass_blocks(i)) {
      b.candidates.emplace_back(*given, "");
    } else {
      for (int v : {5, 6, 7}) {
        if (const std::optional<V3BlockSizes> d = v3_block_sizes(in_, p_, pass, v)) {
          b.candidates.emplace_back(*d, " (TPU v" + I(v) + "'s default " + letter + "_block_sizes)");
        }
      }
    }
    return b;
  }

  // Finding 24 (measured in TPU interpret mode: corpus/findings/v3_window_skips_cache_write.npz).
  // kernel.py writes a sequence's new tokens to the cache from the KV blocks its last query
  // block reads (`bq_idx == num_bq - 1`), and with a sliding window those start at that query
  // block's window, floored to bkv_sz: new tokens in earlier KV blocks are never written.
  std::optional<std::string> window_skips_cache_write(int64_t i, int64_t q_len, int64_t kv_len) const {
    const PassBlocks b = pass_blocks_of(i);
    const int64_t w = *p_.sliding_window, gap = kv_len - q_len;
    for (const auto& [blocks, tag] : b.candidates) {
      const int64_t bq_sz = blocks[0], bkv_sz = blocks[1];
      const int64_t actual = b.static_q_len ? std::min(bq_sz, *b.static_q_len) : bq_sz;
      if (actual <= 0 || bkv_sz <= 0) continue;
      const int64_t rows = b.static_q_len ? *b.static_q_len : q_len;
      const int64_t last = gap + (rows + actual - 1) / actual * actual - actual;
      const int64_t start = std::max<int64_t>(sat_sub(last, w), 0) / bkv_sz * bkv_sz;
      if (gap / bkv_sz * bkv_sz < start) {
        return "sliding_window=" + I(w) + ": kernel.py writes sequence " + I(i) +
               "'s new tokens to the cache only from the KV blocks its last query block reads, "
               "which start at position " + I(start) + ", so its new tokens at positions " +
               I(gap) + ".." + I(std::min(start, kv_len) - 1) + " are never written (bkv_sz=" +
               I(bkv_sz) + ")" + tag + ".";
      }
    }
    return std::nullopt;
  }

  // Finding 23 (schedule/v3_program.h runs it; tpu-inference's kernel in interpret mode gives
  // the same NaN). kernel.py starts each query block with m = -inf and rounds each KV compute
  // block's row max to out_dtype, bfloat16 for bfloat16 q. Where a row sees no key in its
  // query block's first compute block (a sliding window starting past it), that max is
  // mask_value rounded; if the rounding moved it away from zero, exp(mask_value - max)
  // overflows to inf, and the next block's rescale makes the row 0 * inf = NaN. Exactly those
  // rows: the first KV block of a query block starts at the window's start for its first
  // row, floored to bkv_sz; a row r sees keys from max(position - W + 1, 0). Without block
  // sizes, any TPU generation's defaults that hit it.
  std::optional<std::string> masked_block_overflow(int64_t i, int64_t q_len, int64_t kv_len) const {
    if (dt(in_.queries) != DType::kBFloat16 ||
        (p_.out_dtype && *p_.out_dtype != DType::kBFloat16)) {
      return std::nullopt;
    }
    const auto mask = static_cast<float>(*p_.mask_value);
    const float rounded = round_to(DType::kBFloat16, mask);
    if (!std::isinf(std::exp(mask - rounded))) return std::nullopt;
    const PassBlocks b = pass_blocks_of(i);
    const int64_t w = *p_.sliding_window, gap = kv_len - q_len;
    for (const auto& [blocks, tag] : b.candidates) {
      const auto [bq_sz, bkv_sz, bq_csz, bkv_csz] = blocks;
      const int64_t actual = b.static_q_len ? std::min(bq_sz, *b.static_q_len) : bq_sz;
      if (actual <= 0 || bkv_sz <= 0 || bkv_csz <= 0) continue;
      for (int64_t row = 0; row < q_len; ++row) {
        const int64_t processed = gap + row / actual * actual;  // its query block's first row
        const int64_t k0 = std::max<int64_t>(sat_sub(processed, w), 0) / bkv_sz * bkv_sz;
        const int64_t position = gap + row;
        if (std::max<int64_t>(sat_sub(position + 1, w), 0) >= sat_add(k0, bkv_csz)) {
          return "mask_value=" + F(*p_.mask_value) + " rounds away from zero in bfloat16 (to " +
                 F(rounded) + "), the out_dtype kernel.py rounds each KV compute block's row " +
                 "max to: row " + I(row) + " of sequence " + I(i) + " (position " + I(position) +
                 ") sees no key in its first KV compute block [" + I(k0) + ", " +
                 I(sat_add(k0, bkv_csz)) + ") under sliding_window=" + I(w) + tag +
                 ", so exp(mask_value - max) overflows and the row is NaN.";
        }
      }
    }
    return std::nullopt;
  }

  // Where the validators accept but the kernel raises when tracing (native: crash rules).
  // kernel.py bitcasts q blocks to and from out_dtype (default float32 for float32 q, else
  // bfloat16): measured, a q or out_dtype of another width fails at trace with "TypeError:
  // cannot reshape array ..." (fp8 and int32 q, float32 out under bfloat16 q, bfloat16 out
  // under float32 q), while float16 q traces. hd64 is taken to fail alike (inferred).
  void kernel_rules() {
    const DType q = dt(in_.queries);
    const DType def = q == DType::kFloat32 ? DType::kFloat32 : DType::kBFloat16;
    const bool q_ok = strict() ? (q == DType::kFloat32 || q == DType::kBFloat16)
                               : (q == DType::kFloat32 || dtype_bits(q) == 16);
    if (!q_ok) {
      fail(V3RuleId::q_dtype_unsupported,
           strict() ? "q.dtype=" + dtr(in_.queries) + " must be float32 or bfloat16."
                    : "TypeError at trace: q.dtype=" + dtr(in_.queries) +
                          " (the kernel computes q in float32 or bfloat16)");
      if (done()) return;
    }
    if (hd64_ && q_ok && in_.attention_sink && sink_ok_ && Hkv_ > 0 && Hq_ > 0 && Hq_ % Hkv_ == 0) {
      sink_group(q);
      if (done()) return;
    }
    if (hd64_) return;
    // Native: only a width change fails at trace (float16 out under bfloat16 q is inferred to
    // trace, as float16 q does).
    const bool out_bad =
        p_.out_dtype && q_ok &&
        (strict() ? *p_.out_dtype != def : dtype_bits(*p_.out_dtype) != dtype_bits(def));
    if (out_bad) {
      fail(V3RuleId::out_dtype_not_default, std::string(strict() ? "" : "TypeError at trace: ") +
                                                "out_dtype=" + dtype_repr(*p_.out_dtype) +
                                                " must be the default " + dtype_repr(def) +
                                                " for q.dtype=" + dtr(in_.queries) + ".");
      if (done()) return;
    }
    if (!strict() && D_ == 0) head_dim_zero_at_trace();
  }

  // kernel.py's body loads a row of align(0, 128) = 0 lanes as 0 folds of 128 and asserts
  // sz % step with step 0 (finding 27: measured in TPU interpret mode, on every call).
  void head_dim_zero_at_trace() {
    fail(V3RuleId::head_dim_zero,
         "ZeroDivisionError at trace: head_dim=0 (strided_load: integer modulo by zero)");
  }

  // kernel_hd64's prepare_inputs reshapes the sinks to (-1, g', 1), g' = Hq/Hkv aligned up to
  // q's packing (2 for bfloat16), and its kernel reads row h for kv head h. With g' != g the
  // reshape fails at trace (Hq not a multiple of g'), or gives Hq / g' < Hkv rows: kv heads
  // past them read past the sinks (interpret mode: IndexError; a TPU: unchecked VMEM).
  // Measured in TPU interpret mode (rpa.jax.v3_pallas, issue 23): bfloat16 q with 1 or 3 q
  // heads per kv head fails for 1, 2 and 4 kv heads; float32 q runs every group.
  void sink_group(DType q) {
    const int64_t packing = 32 / dtype_bits(q);
    const int64_t group = Hq_ / Hkv_;
    if (group % packing == 0) return;
    const int64_t padded = (group + packing - 1) / packing * packing;
    const std::string tail = "attention_sink is reshaped to (-1, " + I(padded) + ", 1): " +
                             I(group) + " q heads per kv head padded to q's packing " +
                             I(packing) + " (" + dtr(in_.queries) + ")";
    if (strict()) {
      fail(V3RuleId::sink_group_unpacked,
           tail + "; Hq/Hkv must be a multiple of it for every kv head to get its sinks.");
    } else if (Hq_ % padded != 0) {
      fail(V3RuleId::sink_group_unpacked, "TypeError at trace: " + tail + ", which " +
                                              I(Hq_) + " sinks do not fill.");
    } else {
      fail(V3RuleId::sink_group_unpacked,
           "IndexError: " + tail + ": " + I(Hq_ / padded) + " rows for " + I(Hkv_) +
               " kv heads (kernel_hd64 reads sinks past the array).");
    }
  }

  Dialect d_;
  const V3Inputs& in_;
  const V3Params& p_;
  Mode m_;
  bool first_only_;
  bool hd64_;
  std::vector<V3Failure> failures_;
  const std::optional<V3BlockSizes> no_blocks_;
  bool dynamic_ok_ = true;
  bool sink_ok_ = false;
  int64_t T_ = 0, Hq_ = 0, D_ = 0, Hkv_ = 0;
  int64_t pages_ = 0, ps_ = 0, P_ = 1;
  int64_t N_ = 0, pps_ = 0;
  int64_t d0_ = 0, d1_ = 0;
};

}  // namespace

std::optional<V3Failure> v3_validate(Dialect d, const V3Inputs& in, const V3Params& p, Mode m) {
  std::vector<V3Failure> f = Walk(d, in, p, m, true).run();
  if (f.empty()) return std::nullopt;
  return std::move(f.front());
}

std::vector<V3Failure> v3_validate_all(Dialect d, const V3Inputs& in, const V3Params& p, Mode m) {
  return Walk(d, in, p, m, false).run();
}

}  // namespace rpa
