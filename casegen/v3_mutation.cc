#include "casegen/v3_mutation.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/float32_scalar.h"
#include "core/python_repr.h"
#include "core/tensor.h"
#include "core/v3_cache_layout.h"
#include "schedule/v3_program.h"

namespace rpa::props {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kFloat32Max = 3.4028234663852886e38;  // float32's largest finite value

struct KindInfo {
  V3MutationKind kind;
  std::string_view name;
  V3RuleId rule;
  V3MutationGroup group;
  bool v3;
  bool hd64;
};

constexpr KindInfo kKinds[] = {
#define RPA_V3_MUTATION_INFO(name, rule, group, v3, hd64) \
  {V3MutationKind::name, #name, V3RuleId::rule, V3MutationGroup::group, v3, hd64},
    RPA_V3_MUTATIONS(RPA_V3_MUTATION_INFO)
#undef RPA_V3_MUTATION_INFO
};

constexpr V3MutationKind kAllKinds[] = {
#define RPA_V3_MUTATION_KIND(name, rule, group, v3, hd64) V3MutationKind::name,
    RPA_V3_MUTATIONS(RPA_V3_MUTATION_KIND)
#undef RPA_V3_MUTATION_KIND
};

const KindInfo& info(V3MutationKind k) { return kKinds[static_cast<size_t>(k)]; }

// The messages' pieces as Python prints them (v3-contract.md section 2): plain ints and
// floats, shapes as tuples, dtypes as numpy's repr, and jax int32 scalars and vectors
// where the dynamic checks print arrays.
std::string I(int64_t v) { return py_int_repr(v); }
std::string F(double v) { return py_float_repr(v); }
std::string Dt(DType t) { return dtype_repr(t); }
std::string jax_scalar(int64_t v) { return jax_int32_repr(v); }
std::string jax_vector(const std::vector<int64_t>& v) { return jax_int32_vector_repr(v); }

// What the dialect's native mode sees after jnp.asarray with jax_enable_x64 off.
DType native_view(DType t) {
  if (t == DType::kInt64) return DType::kInt32;
  if (t == DType::kUInt64) return DType::kUInt32;
  if (t == DType::kFloat64) return DType::kFloat32;
  return t;
}

int64_t rank_of(V3RuleId r) { return 1000 * static_cast<int64_t>(r); }

// One mutation at work: the case's arrays and keywords, and what it declares.
class Mutator {
 public:
  Mutator(const V3Mutation& m, const V3CaseSpec& s, V3Materialized& c, std::vector<V3Declared>& out)
      : arg_(m.arg < 0 ? 0 : m.arg),
        s_(s),
        in_(c.inputs),
        p_(c.params),
        out_(out),
        hd64_(s.dialect == Dialect::kTpuInferenceV3Hd64) {}

  // The mutation, then what the kernel rules make of its sinks (declare_sink_group) and of its
  // sliding window (declare_window_rules).
  void run(V3MutationKind kind) {
    apply(kind);
    // Both are functions of the call as it now is: what an earlier mutation's call made of
    // them goes, and is declared again if it still holds (a later mutation may take it back:
    // window_skips_cache_write's window of 1, then sliding_window_too_large's INT32_MAX).
    std::erase_if(out_, [](const V3Declared& d) {
      return d.failure.rule == V3RuleId::sink_group_unpacked ||
             d.failure.rule == V3RuleId::masked_block_overflows ||
             d.failure.rule == V3RuleId::window_skips_cache_write ||
             d.failure.rule == V3RuleId::window_int16_wraps ||
             d.failure.rule == V3RuleId::window_int32_wraps;
    });
    declare_sink_group();
    declare_window_rules();
    declare_window_wraps();
  }

 private:
  // One function per family of mutations, each a switch over its own (apply dispatches).
  void apply(V3MutationKind kind);
  void apply_signature(V3MutationKind kind);
  void apply_arrays(V3MutationKind kind);
  void apply_metadata(V3MutationKind kind);
  void apply_blocks(V3MutationKind kind);
  void apply_keywords(V3MutationKind kind);

  // masked_block_overflows and window_skips_cache_write (findings 23 and 24), strict mode:
  // the first sequence whose rows or new tokens kernel.py's schedule leaves wrong. Any mutation
  // that sets a window (sliding_window_nonpositive's valid side), mask_value -1e30
  // (mask_value_too_large's) or other block sizes can make them on a call the generator keeps
  // clear of both. Modelled on the kernel's loops: query blocks of bq_sz rows (decode: 1;
  // prefill: chunk_prefill_size rows), each reading KV blocks from its first row's window,
  // floored to bkv_sz; without a block tuple, each TPU generation's defaults in turn.
  // The validator checks them per sequence after that sequence's other per-sequence rules,
  // as the window wraps below: the first sequence where one holds, unless an earlier
  // per-sequence rule stops the walk at or before it (stops_at: a kShape mutation's, which
  // declared it), is declared ahead of any later sequence's rules (a page index out of range
  // at sequence 1 comes after sequence 0's masked block).
  void declare_window_rules() {
    if (hd64_ || !p_.sliding_window || *p_.sliding_window < 1) return;
    for (const Tensor* t : {&in_.distribution, &in_.kv_lens, &in_.cu_q_lens, &in_.page_indices}) {
      if (t->dtype() != DType::kInt32 || t->rank() != 1) return;  // an earlier rule fails
    }
    if (in_.distribution.numel() != 3 || in_.queries.rank() != 3 || in_.keys.rank() != 3) return;
    if (in_.kv_cache.rank() != 5) return;  // an earlier rule fails
    const int64_t w = *p_.sliding_window, n = in_.distribution.int_at(2);
    if (n < 0 || n > in_.kv_lens.numel() || n + 1 > in_.cu_q_lens.numel()) return;
    const int64_t slots = in_.kv_lens.numel(), S = in_.kv_cache.dim(1);
    if (slots == 0 || S <= 0 || in_.page_indices.numel() % slots != 0) return;
    const int64_t pps = in_.page_indices.numel() / slots;
    float rounded = 0.0f;
    bool overflows = false;
    if (p_.mask_value && in_.queries.dtype() == DType::kBFloat16 &&
        (!p_.out_dtype || *p_.out_dtype == DType::kBFloat16)) {
      const auto mask = static_cast<float>(*p_.mask_value);
      rounded = round_to(DType::kBFloat16, mask);
      overflows = std::isinf(std::exp(mask - rounded));
    }
    for (int64_t i = 0; i < n; ++i) {
      if (stops_at(i, pps, S)) return;
      const int64_t len = kv(i), rows_q = q_len(i), gap = len - rows_q;
      const bool decode = i < d0(), prefill = !decode && i < d1();
      const V3Pass pass = decode ? V3Pass::kDecode : prefill ? V3Pass::kPrefill : V3Pass::kMixed;
      const int64_t rows = decode ? 1 : prefill ? p_.chunk_prefill_size.value_or(rows_q) : rows_q;
      std::vector<std::pair<V3BlockSizes, std::string>> tuples;
      if (pass_blocks(i)) {
        tuples.emplace_back(*pass_blocks(i), "");
      } else {
        for (int v : {5, 6, 7}) {
          // None where a shape mutation left nothing to compute the defaults from.
          if (const std::optional<V3BlockSizes> b = v3_block_sizes(in_, p_, pass, v)) {
            tuples.emplace_back(*b, " (TPU v" + I(v) + "'s default " + pass_letter(i) +
                                        "_block_sizes)");
          }
        }
      }
      for (bool cache_write : {false, true}) {
        if (cache_write ? !p_.update_kv_cache : !overflows) continue;
        for (const auto& [b, tag] : tuples) {
          const int64_t bq = decode || prefill ? std::min(b[0], rows) : b[0];
          if (bq <= 0 || b[1] <= 0 || b[3] <= 0) continue;
          for (int64_t first = 0; first < rows_q; first += bq) {  // each query block
            const int64_t from = std::max<int64_t>(gap + first - w, 0) / b[1] * b[1];
            if (cache_write) {
              if (first + bq < rows_q || gap / b[1] * b[1] >= from) continue;  // not the last
              strict(V3RuleId::window_skips_cache_write,
                     "sliding_window=" + I(w) + ": kernel.py writes sequence " + I(i) +
                         "'s new tokens to the cache only from the KV blocks its last query "
                         "block reads, which start at position " + I(from) + ", so its new "
                         "tokens at positions " + I(gap) + ".." + I(std::min(from, len) - 1) +
                         " are never written (bkv_sz=" + I(b[1]) + ")" + tag + ".",
                     rank_of(V3RuleId::q_len_range) - 1);
              return;
            }
            for (int64_t r = first; r < std::min(first + bq, rows_q); ++r) {
              if (std::max<int64_t>(gap + r - w + 1, 0) < from + b[3]) continue;
              strict(V3RuleId::masked_block_overflows,
                     "mask_value=" + F(*p_.mask_value) + " rounds away from zero in bfloat16 (to " +
                         F(rounded) + "), the out_dtype kernel.py rounds each KV compute block's "
                         "row max to: row " + I(r) + " of sequence " + I(i) + " (position " +
                         I(gap + r) + ") sees no key in its first KV compute block [" + I(from) +
                         ", " + I(from + b[3]) + ") under sliding_window=" + I(w) + tag +
                         ", so exp(mask_value - max) overflows and the row is NaN.",
                     rank_of(V3RuleId::q_len_range) - 1);
              return;
            }
          }
        }
      }
    }
  }

  // window_int16_wraps and window_int32_wraps (findings 25 and 26), strict mode. kernel.py
  // on TPU v6 and later holds mask positions in int16 for bfloat16 q when pages_per_seq *
  // page_size <= 32767, and its window test wraps there: the last row of a sequence loses a
  // key the definition keeps where kv_len - 1 + c >= 32768, or (a window past int16)
  // c < kv_len, c = W mod 2^16. Everywhere else its positions are int32, and the test wraps
  // where kv_len - 1 + W > 2147483647. Generated windows (<= 8192) and kv_lens (<= 4096)
  // never meet either; the two rules' mutations and sliding_window_too_large's INT32_MAX do.
  // The validator checks them per sequence after the other per-sequence rules of that
  // sequence, int16 first: the first sequence where one holds, unless an earlier
  // per-sequence rule stops the walk at or before it (a kShape mutation's, which declared
  // it), is declared ahead of any later sequence's rules. (masked_block_overflows and
  // window_skips_cache_write need a window below kv_len, these a window past 32767 - kv_len:
  // no generated call has both.)
  void declare_window_wraps() {
    if (hd64_ || !p_.sliding_window || *p_.sliding_window < 1) return;
    if (*p_.sliding_window > kInt32Max || in_.kv_cache.rank() != 5) return;
    for (const Tensor* t : {&in_.distribution, &in_.kv_lens, &in_.cu_q_lens, &in_.page_indices}) {
      if (t->dtype() != DType::kInt32 || t->rank() != 1) return;  // an earlier rule fails
    }
    const int64_t slots = in_.kv_lens.numel(), S = in_.kv_cache.dim(1);
    if (in_.distribution.numel() != 3 || slots == 0 || S <= 0 ||
        in_.page_indices.numel() % slots != 0 || in_.cu_q_lens.numel() != slots + 1)
      return;
    const int64_t pps = in_.page_indices.numel() / slots;
    const bool int16 = in_.queries.dtype() == DType::kBFloat16 && pps <= 32767 / S;
    const int64_t w = *p_.sliding_window, c = w % 65536, n = in_.distribution.int_at(2);
    if (n < 0 || n > slots) return;
    for (int64_t i = 0; i < n; ++i) {
      if (stops_at(i, pps, S)) return;
      const int64_t len = kv(i);
      const bool from_zero = c >= 32768 || (w >= 32768 && c < len);
      if (int16 && (from_zero || c + len - 1 >= 32768)) {
        strict(V3RuleId::window_int16_wraps,
               "sequence " + I(i) + " (kv_len=" + I(len) + ") under sliding_window=" + I(w) +
                   ": kernel.py on TPU v6 and later holds mask positions in int16 (bfloat16 q, "
                   "pages_per_seq * page_size = " + I(pps * S) + " <= 32767), where key + "
                   "sliding_window wraps past 32767: the row at position " + I(len - 1) +
                   " loses key " + I(from_zero ? 0 : 32768 - c) + ", which the definition keeps.",
               rank_of(V3RuleId::q_len_range) - 1);
        return;
      }
      if (len - 1 + w > kInt32Max) {
        strict(V3RuleId::window_int32_wraps,
               "sequence " + I(i) + " (kv_len=" + I(len) + ") under sliding_window=" + I(w) +
                   ": kernel.py adds the window to int32 key positions, where key + "
                   "sliding_window wraps past 2147483647: the row at position " + I(len - 1) +
                   " loses key " + I(kInt32Max + 1 - w) + ", which the definition keeps.",
               rank_of(V3RuleId::q_len_range) - 1);
        return;
      }
    }
  }

  // Whether a per-sequence rule checked before window_int16_wraps fails at sequence i in
  // strict mode (validation/v3_validate.cc's sequence(): q_len_range, the decode and prefill
  // q_lens, page_count_too_large, page_index_out_of_range, kv_len_overflows_int32, the
  // skip_kv_mask rules), as a kShape mutation may have left it.
  bool stops_at(int64_t i, int64_t pps, int64_t S) {
    const int64_t len = kv(i), rows = q_len(i);
    const int64_t d0 = in_.distribution.int_at(0), d1 = in_.distribution.int_at(1);
    if (!(0 < rows && rows <= len)) return true;
    if (i < d0 && rows != 1) return true;
    if (d0 <= i && i < d1 && p_.chunk_prefill_size && rows != *p_.chunk_prefill_size) return true;
    const int64_t pages = (len - 1) / S + 1;
    if (pages > pps) return true;
    for (int64_t j = 0; j < pages; ++j) {
      const int64_t page = in_.page_indices.int_at(i * pps + j);
      if (page < 0 || page >= in_.kv_cache.dim(0)) return true;
    }
    const std::optional<V3BlockSizes>& blocks =
        i < d0 ? p_.d_block_sizes : (i < d1 && p_.chunk_prefill_size ? p_.p_block_sizes : p_.m_block_sizes);
    const int64_t bkv = std::max<int64_t>(blocks ? (*blocks)[1] : S * (pps + 1), 1);
    if (len > kInt32Max - bkv + 1) return true;
    if (p_.skip_kv_mask && (!blocks || ((*blocks)[3] > 0 && len % (*blocks)[3] != 0))) return true;
    return false;
  }

  // sink_group_unpacked, in each mode where the mutated call reaches it: an hd64 call with
  // a well-formed float32 sink whose q heads per kv head are not a multiple of q's packing
  // (validation/v3_validate.cc's sink_group). Any mutation can make one: a sink where the
  // generator gave none (it gives bfloat16 q with an odd group none), float16 q natively.
  void declare_sink_group() {
    if (!hd64_ || !in_.attention_sink) return;
    const Tensor& sink = *in_.attention_sink;
    if (sink.rank() != 1 || sink.dim(0) != Hq() || Hkv() <= 0 || Hq() <= 0 || Hq() % Hkv() != 0)
      return;
    for (Mode mode : {Mode::kJax, Mode::kStrict}) {
      const bool is_strict = mode == Mode::kStrict;
      const DType q = is_strict ? in_.queries.dtype() : native_view(in_.queries.dtype());
      const DType sink_dtype = is_strict ? sink.dtype() : native_view(sink.dtype());
      const bool q_ok = is_strict ? (q == DType::kFloat32 || q == DType::kBFloat16)
                                  : (q == DType::kFloat32 || dtype_bits(q) == 16);
      if (!q_ok || sink_dtype != DType::kFloat32) continue;
      const int64_t packing = 32 / dtype_bits(q);
      const int64_t group = Hq() / Hkv();
      if (group % packing == 0) continue;
      const int64_t padded = (group + packing - 1) / packing * packing;
      const std::string tail = "attention_sink is reshaped to (-1, " + I(padded) + ", 1): " +
                               I(group) + " q heads per kv head padded to q's packing " +
                               I(packing) + " (" + Dt(q) + ")";
      if (is_strict) {
        strict(V3RuleId::sink_group_unpacked,
               tail + "; Hq/Hkv must be a multiple of it for every kv head to get its sinks.");
      } else if (Hq() % padded != 0) {
        native(V3RuleId::sink_group_unpacked,
               "TypeError at trace: " + tail + ", which " + I(Hq()) + " sinks do not fill.");
      } else {
        native(V3RuleId::sink_group_unpacked,
               "IndexError: " + tail + ": " + I(Hq() / padded) + " rows for " + I(Hkv()) +
                   " kv heads (kernel_hd64 reads sinks past the array).");
      }
    }
  }

  // Declarations.
  void native(V3RuleId r, std::string msg, int64_t rank = -1) {
    out_.push_back({Mode::kJax, {r, std::move(msg)}, rank < 0 ? rank_of(r) : rank});
  }
  void strict(V3RuleId r, std::string msg, int64_t rank = -1) {
    out_.push_back({Mode::kStrict, {r, std::move(msg)}, rank < 0 ? rank_of(r) : rank});
  }
  void both(V3RuleId r, const std::string& msg) {
    native(r, msg);
    strict(r, msg);
  }
  // The variant arg picks among n, and what is left of arg for where it applies.
  int64_t variant(int64_t n) const { return arg_ % n; }
  int64_t rest(int64_t n) const { return arg_ / n; }

  int64_t k() const { return s_.num_seqs(); }
  int64_t N() const { return s_.max_num_seqs(); }
  int64_t pps() const { return s_.pages_per_seq(); }
  int64_t ps() const { return s_.page_size; }
  int64_t T() const { return in_.queries.dim(0); }
  int64_t Hq() const { return in_.queries.dim(1); }
  int64_t D() const { return in_.queries.dim(2); }
  int64_t Hkv() const { return in_.keys.dim(1); }
  int64_t P() const { return v3_kv_packing(s_.kv_dtype); }
  int64_t d0() const { return s_.num_decode; }
  int64_t d1() const { return s_.num_decode + s_.num_prefill; }
  int64_t kv(int64_t i) const { return in_.kv_lens.int_at(i); }
  int64_t cu(int64_t i) const { return in_.cu_q_lens.int_at(i); }
  int64_t q_len(int64_t i) const { return cu(i + 1) - cu(i); }
  std::string fn() const {
    return hd64_ ? "ragged_paged_attention_hd64()" : "ragged_paged_attention()";
  }
  // The pass whose block tuple sequence i runs under (kernel.py).
  std::optional<V3BlockSizes>& pass_blocks(int64_t i) {
    if (i < d0()) return p_.d_block_sizes;
    if (i < d1() && p_.chunk_prefill_size) return p_.p_block_sizes;
    return p_.m_block_sizes;
  }
  const char* pass_letter(int64_t i) const {
    return i < d0() ? "d" : (i < d1() && p_.chunk_prefill_size ? "p" : "m");
  }

  static Tensor reshaped(const Tensor& t, Shape shape) {
    return Tensor(t.dtype(), std::move(shape),
                  std::vector<std::byte>(t.bytes().begin(), t.bytes().end()));
  }
  // q, k and v with `rows` token rows (new rows zero).
  void resize_tokens(int64_t rows) {
    for (Tensor* t : {&in_.queries, &in_.keys, &in_.values}) {
      Tensor n(t->dtype(), {rows, t->dim(1), t->dim(2)});
      const int64_t row_bytes = t->dim(1) * t->dim(2) * dtype_size(t->dtype());
      const int64_t keep = std::min(rows, t->dim(0)) * row_bytes;
      std::copy_n(t->data(), keep, n.data());
      *t = std::move(n);
    }
  }
  // The cache, keys and values in another dtype of the same packing (zeros: validation reads
  // no data).
  void retype_kv(DType t) {
    in_.kv_cache = Tensor(t, in_.kv_cache.shape());
    in_.keys = Tensor(t, in_.keys.shape());
    in_.values = Tensor(t, in_.values.shape());
  }
  // An index array in another dtype, same values.
  static Tensor retyped_index(const Tensor& t, DType dtype) {
    Tensor n(dtype, t.shape());
    for (int64_t e = 0; e < t.numel(); ++e) {
      if (dtype_is_float(dtype)) {
        n.set_float(e, static_cast<double>(t.int_at(e)));
      } else {
        n.set_int(e, t.int_at(e));
      }
    }
    return n;
  }
  // cu_q_lens[j] += delta for j in (s, k], rows added to q/k/v where the batch outgrows them.
  void shift_rows_after(int64_t s, int64_t delta) {
    for (int64_t j = s + 1; j <= k(); ++j) in_.cu_q_lens.set_int(j, cu(j) + delta);
    if (cu(k()) > T()) resize_tokens(cu(k()));
  }
  std::string cache_expected() const {
    const Tensor& c = in_.kv_cache;
    std::string s = "(";
    for (int64_t v :
         {c.dim(0), c.dim(1), (2 * Hkv() + P() - 1) / P(), P(), (D() + 127) / 128 * 128}) {
      if (s.size() > 1) s += ", ";
      s += I(v);
    }
    return s + ")";
  }
  std::string where(int64_t i) const {
    return " at sequence " + I(i) + " where kv_len=" + jax_scalar(kv(i)) +
           " and page_size=" + I(ps()) + ".";
  }
  std::string tuple_name(int t) const {
    static const char* const names[] = {"decode", "prefill", "mixed"};
    return names[t];
  }
  std::optional<V3BlockSizes>& tuple(int t) {
    return t == 0 ? p_.d_block_sizes : (t == 1 ? p_.p_block_sizes : p_.m_block_sizes);
  }
  // kernel.py's block tuple t (picked by arg), which the generator always gives (a call
  // without them gets none of these mutations: v3_mutation_applies).
  V3BlockSizes& some_tuple(int64_t selector, int& t) {
    t = static_cast<int>(selector % 3);
    return *tuple(t);
  }
  // A float keyword's strict finiteness rule: nan, inf, -inf, 1e39 (inf as a float32), and
  // just inside, float32's largest value.
  void finite_rule(V3RuleId r, const char* name, double& field) {
    static const double values[] = {kNaN, kInf, -kInf, 1e39, kFloat32Max};
    field = values[variant(5)];
    if (variant(5) < 4)
      strict(r, std::string(name) + "=" + F(field) + " must be finite as a float32.");
  }
  void finite_rule(V3RuleId r, const char* name, std::optional<double>& field) {
    double v = 0;
    finite_rule(r, name, v);
    field = v;
  }

  int64_t arg_;
  const V3CaseSpec& s_;
  V3Inputs& in_;
  V3Params& p_;
  std::vector<V3Declared>& out_;
  bool hd64_;
};

void Mutator::apply(V3MutationKind kind) {
  switch (kind) {
    case V3MutationKind::keyword_not_in_dialect:
    case V3MutationKind::causal_skip_kv_mask:
    case V3MutationKind::out_dtype_not_default:
      return apply_signature(kind);
    case V3MutationKind::qkv_rank:
    case V3MutationKind::kv_shape_mismatch:
    case V3MutationKind::num_tokens_mismatch:
    case V3MutationKind::head_dim_mismatch:
    case V3MutationKind::sink_rank:
    case V3MutationKind::sink_shape:
    case V3MutationKind::sink_dtype:
    case V3MutationKind::head_dim_not_64:
    case V3MutationKind::kv_heads_zero:
    case V3MutationKind::heads_not_divisible:
    case V3MutationKind::kv_dtype_unsupported:
    case V3MutationKind::kv_dtype_not_float:
    case V3MutationKind::dtype_pair:
    case V3MutationKind::kv_cache_rank:
    case V3MutationKind::kv_cache_shape:
    case V3MutationKind::kv_cache_last_dim:
    case V3MutationKind::kv_dtype_mismatch:
    case V3MutationKind::kv_packing_mismatch:
    case V3MutationKind::kv_cache_heads:
    case V3MutationKind::q_heads_zero:
    case V3MutationKind::head_dim_zero:
    case V3MutationKind::sink_nonfinite:
    case V3MutationKind::q_dtype_unsupported:
    case V3MutationKind::sink_group_unpacked:
      return apply_arrays(kind);
    case V3MutationKind::index_dtype:
    case V3MutationKind::index_rank:
    case V3MutationKind::max_num_seqs_zero:
    case V3MutationKind::page_indices_not_divisible:
    case V3MutationKind::cu_q_lens_shape:
    case V3MutationKind::distribution_shape:
    case V3MutationKind::page_size_packing:
    case V3MutationKind::page_size_zero:
    case V3MutationKind::distribution_order:
    case V3MutationKind::num_seqs_too_large:
    case V3MutationKind::distribution_negative:
    case V3MutationKind::prefill_without_chunk_size:
    case V3MutationKind::cu_q_lens_first_nonzero:
    case V3MutationKind::cu_q_lens_decreasing:
    case V3MutationKind::total_q_tokens_too_large:
    case V3MutationKind::q_len_range:
    case V3MutationKind::decode_q_len_not_one:
    case V3MutationKind::prefill_q_len_not_chunk:
    case V3MutationKind::page_count_too_large:
    case V3MutationKind::page_index_out_of_range:
    case V3MutationKind::kv_len_overflows_int32:
    case V3MutationKind::update_page_shared:
      return apply_metadata(kind);
    case V3MutationKind::block_bq_sizes:
    case V3MutationKind::block_bkv_sizes:
    case V3MutationKind::block_bkv_page:
    case V3MutationKind::block_bkv_csz_page:
    case V3MutationKind::kv_pages_per_block_nonpositive:
    case V3MutationKind::queries_per_block_nonpositive:
    case V3MutationKind::block_size_nonpositive:
    case V3MutationKind::skip_kv_mask_block_unknown:
    case V3MutationKind::skip_kv_mask_kv_len:
    case V3MutationKind::masked_block_overflows:
    case V3MutationKind::window_skips_cache_write:
      return apply_blocks(kind);
    case V3MutationKind::sliding_window_nonpositive:
    case V3MutationKind::soft_cap_zero:
    case V3MutationKind::chunk_prefill_nonpositive:
    case V3MutationKind::vmem_limit_nonpositive:
    case V3MutationKind::sliding_window_too_large:
    case V3MutationKind::soft_cap_nonfinite:
    case V3MutationKind::sm_scale_nonfinite:
    case V3MutationKind::q_scale_invalid:
    case V3MutationKind::k_scale_nonfinite:
    case V3MutationKind::v_scale_nonfinite:
    case V3MutationKind::mask_value_nonfinite:
    case V3MutationKind::mask_value_too_large:
    case V3MutationKind::window_int16_wraps:
    case V3MutationKind::window_int32_wraps:
      return apply_keywords(kind);
  }
}

// The call's signature: keywords the dialect does not take, and keyword pairs its
// validators turn away.
void Mutator::apply_signature(V3MutationKind kind) {
  using R = V3RuleId;
  switch (kind) {
    case V3MutationKind::keyword_not_in_dialect: {
      if (!hd64_) {
        const int64_t v = variant(3);
        if (v == 2) {
          in_.attention_sink = Tensor(DType::kFloat32, {Hq()});
          both(R::keyword_not_in_dialect,
               "TypeError: " + fn() + " takes 8 positional arguments but 9 were given");
          return;
        }
        (v == 0 ? p_.num_kv_pages_per_block : p_.num_queries_per_block) = 1;
        both(R::keyword_not_in_dialect,
             "TypeError: " + fn() + " got an unexpected keyword argument '" +
                 (v == 0 ? "num_kv_pages_per_block" : "num_queries_per_block") + "'");
        return;
      }
      static const char* const names[] = {"use_causal_mask", "update_kv_cache", "skip_kv_mask",
                                          "out_dtype",       "d_block_sizes",   "p_block_sizes",
                                          "m_block_sizes"};
      const int64_t v = variant(7);
      const V3BlockSizes one{1, ps(), 1, ps()};
      switch (v) {
        case 0:
          p_.use_causal_mask = false;
          break;
        case 1:
          p_.update_kv_cache = false;
          break;
        case 2:
          p_.skip_kv_mask = true;
          break;
        case 3:
          p_.out_dtype = s_.q_dtype;
          break;
        case 4:
          p_.d_block_sizes = one;
          break;
        case 5:
          p_.p_block_sizes = one;
          break;
        default:
          p_.m_block_sizes = one;
          break;
      }
      both(R::keyword_not_in_dialect,
           "TypeError: " + fn() + " got an unexpected keyword argument '" + names[v] + "'");
      return;
    }
    case V3MutationKind::causal_skip_kv_mask:
      p_.use_causal_mask = true;
      p_.skip_kv_mask = true;
      both(R::causal_skip_kv_mask, "Can not skip kv mask when using causal mask.");
      return;
    case V3MutationKind::out_dtype_not_default: {
      const DType def = s_.q_dtype;  // generated q is float32 or bfloat16: its own default
      const DType other = def == DType::kFloat32 ? DType::kBFloat16 : DType::kFloat32;
      const DType out =
          variant(3) == 0 ? other : (variant(3) == 1 ? DType::kFloat16 : DType::kFloat64);
      p_.out_dtype = out;
      const std::string tail = "out_dtype=" + Dt(out) + " must be the default " + Dt(def) +
                               " for q.dtype=" + Dt(def) + ".";
      strict(R::out_dtype_not_default, tail);
      if (dtype_bits(out) != dtype_bits(def)) {
        native(R::out_dtype_not_default, "TypeError at trace: " + tail);
      }
      return;
    }
    default:
      std::abort();  // Mutator::apply sends only this family here
  }
}

// q, k, v, the cache and the sinks: ranks, shapes, dtypes, head counts and packing.
void Mutator::apply_arrays(V3MutationKind kind) {
  using R = V3RuleId;
  switch (kind) {
    case V3MutationKind::qkv_rank: {
      Tensor* ts[] = {&in_.queries, &in_.keys, &in_.values};
      Tensor& t = *ts[variant(3)];
      if (rest(3) % 2 == 0) {
        t = reshaped(t, {t.dim(0), t.dim(1) * t.dim(2)});
      } else {
        t = reshaped(t, {t.dim(0), t.dim(1), t.dim(2), 1});
      }
      both(R::qkv_rank, "Expected 3D array for q.shape=" + shape_repr(in_.queries.shape()) +
                            ", k.shape=" + shape_repr(in_.keys.shape()) +
                            ", v.shape=" + shape_repr(in_.values.shape()));
      return;
    }
    case V3MutationKind::kv_shape_mismatch: {
      const Tensor& v = in_.values;
      in_.values = variant(2) == 0 ? Tensor(v.dtype(), {v.dim(0) + 1, v.dim(1), v.dim(2)})
                                   : Tensor(v.dtype(), {v.dim(0), v.dim(1), v.dim(2) + 1});
      both(R::kv_shape_mismatch, "Expected k.shape=" + shape_repr(in_.keys.shape()) +
                                     " to be equal to v.shape=" + shape_repr(in_.values.shape()));
      return;
    }
    case V3MutationKind::num_tokens_mismatch: {
      if (variant(2) == 0) {
        const Tensor& q = in_.queries;
        in_.queries = Tensor(q.dtype(), {q.dim(0) + 1, q.dim(1), q.dim(2)});
      } else {
        for (Tensor* t : {&in_.keys, &in_.values}) {
          *t = Tensor(t->dtype(), {t->dim(0) + 1, t->dim(1), t->dim(2)});
        }
      }
      both(R::num_tokens_mismatch, "Expected q.shape[0]=" + I(in_.queries.dim(0)) +
                                       " to be equal to k.shape[0]=" + I(in_.keys.dim(0)) +
                                       " and v.shape[0]=" + I(in_.values.dim(0)));
      return;
    }
    case V3MutationKind::head_dim_mismatch: {
      if (variant(2) == 0) {
        const Tensor& q = in_.queries;
        in_.queries = Tensor(q.dtype(), {q.dim(0), q.dim(1), q.dim(2) + 1});
      } else {
        for (Tensor* t : {&in_.keys, &in_.values}) {
          *t = Tensor(t->dtype(), {t->dim(0), t->dim(1), t->dim(2) + 1});
        }
      }
      both(R::head_dim_mismatch, "Expected q.shape[2]=" + I(in_.queries.dim(2)) +
                                     " to be equal to k.shape[2]=" + I(in_.keys.dim(2)) +
                                     " and v.shape[2]=" + I(in_.values.dim(2)));
      return;
    }
    case V3MutationKind::sink_rank: {
      // hd64 reads attention_sink.shape[0]: a 0-d sink raises IndexError, a [Hq, 1] one
      // passes every native check (strict wants f32[Hq]).
      if (variant(2) == 0) {
        in_.attention_sink = Tensor(DType::kFloat32, Shape{});
        native(R::sink_rank, "IndexError: tuple index out of range");
      } else {
        in_.attention_sink = Tensor(DType::kFloat32, {Hq(), 1});
      }
      strict(R::sink_rank, "attention_sink.shape=" + shape_repr(in_.attention_sink->shape()) +
                               " must be (" + I(Hq()) + ",).");
      return;
    }
    case V3MutationKind::sink_shape: {
      const int64_t len = variant(2) == 0 ? Hq() + 1 : Hq() - 1;
      in_.attention_sink = Tensor(DType::kFloat32, {len});
      both(R::sink_shape, "Expected attention_sink.shape[0]=" + I(len) +
                              " to be equal to q.shape[1]=" + I(Hq()) + " (num_q_heads).");
      return;
    }
    case V3MutationKind::sink_dtype: {
      static const DType dtypes[] = {DType::kBFloat16, DType::kFloat16, DType::kFloat64};
      const DType t = dtypes[variant(3)];
      in_.attention_sink = Tensor(t, {Hq()});
      const std::string tail = " to be equal to jnp.float32=<class 'jax.numpy.float32'>.";
      // float64 is float32 to native mode (jnp.asarray without x64).
      if (native_view(t) != DType::kFloat32) {
        native(R::sink_dtype, "Expected attention_sink.dtype=" + Dt(native_view(t)) + tail);
      }
      strict(R::sink_dtype, "Expected attention_sink.dtype=" + Dt(t) + tail);
      return;
    }
    case V3MutationKind::head_dim_not_64: {
      static const int64_t dims[] = {128, 63, 65, 32};
      const int64_t d = dims[variant(4)];
      for (Tensor* t : {&in_.queries, &in_.keys, &in_.values}) {
        *t = Tensor(t->dtype(), {t->dim(0), t->dim(1), d});
      }
      both(R::head_dim_not_64, "Expected actual_head_dim=" + I(d) + " to be 64.");
      return;
    }
    case V3MutationKind::kv_heads_zero:
      for (Tensor* t : {&in_.keys, &in_.values}) *t = Tensor(t->dtype(), {t->dim(0), 0, t->dim(2)});
      native(R::kv_heads_zero, "ZeroDivisionError: integer modulo by zero");
      strict(R::kv_heads_zero, "num_kv_heads=0 must be positive.");
      return;
    case V3MutationKind::heads_not_divisible: {
      const int64_t h = Hq() + 1;
      for (Tensor* t : {&in_.keys, &in_.values}) *t = Tensor(t->dtype(), {t->dim(0), h, t->dim(2)});
      both(R::heads_not_divisible, "Expected actual_num_q_heads=" + I(Hq()) +
                                       " to be divisible by actual_num_kv_heads=" + I(h) + ".");
      return;
    }
    case V3MutationKind::kv_dtype_unsupported:
    case V3MutationKind::kv_dtype_not_float: {
      // Another KV dtype of the same packing, so the cache layout still holds. Unsupported
      // floats (float64 for float32, native sees float32; float16 for bfloat16) are valid
      // natively; integers of the width fail native's floating point check.
      const bool floats = kind == V3MutationKind::kv_dtype_unsupported && variant(2) == 0 &&
                          (s_.kv_dtype == DType::kFloat32 || s_.kv_dtype == DType::kBFloat16);
      DType t;
      if (floats) {
        t = s_.kv_dtype == DType::kFloat32 ? DType::kFloat64 : DType::kFloat16;
      } else {
        const bool sign = kind == V3MutationKind::kv_dtype_not_float ? variant(2) == 0 : true;
        const int bits = dtype_bits(s_.kv_dtype);
        t = bits == 32 ? (sign ? DType::kInt32 : DType::kUInt32)
                       : (bits == 16 ? (sign ? DType::kInt16 : DType::kUInt16)
                                     : (sign ? DType::kInt8 : DType::kUInt8));
      }
      retype_kv(t);
      if (!floats) {
        native(R::kv_dtype_not_float,
               "Expected kv_cache.dtype=" + Dt(t) + " to be a floating point.");
      }
      strict(R::kv_dtype_unsupported, "kv_cache.dtype=" + Dt(t) +
                                          " must be float32, bfloat16, float8_e4m3fn or "
                                          "float8_e5m2.");
      return;
    }
    case V3MutationKind::dtype_pair: {
      // q in the other kernel dtype over a same-dtype (non-float8) cache; an explicit out_dtype
      // follows q, so only the pair breaks.
      const DType q = s_.q_dtype == DType::kFloat32 ? DType::kBFloat16 : DType::kFloat32;
      in_.queries = Tensor(q, in_.queries.shape());
      if (p_.out_dtype) p_.out_dtype = q;
      strict(R::dtype_pair, "q.dtype=" + Dt(q) + " with kv_cache.dtype=" + Dt(s_.kv_dtype) +
                                ": q and KV must share a dtype unless KV is float8.");
      return;
    }
    case V3MutationKind::kv_cache_rank: {
      const Tensor& c = in_.kv_cache;
      const int64_t v = variant(3);
      Shape shape;
      if (v == 0) {
        shape = {c.numel()};
      } else if (v == 1) {
        shape = {c.dim(0), c.dim(1), c.dim(2), c.dim(3) * c.dim(4)};
      } else {
        shape = {c.dim(0), c.dim(1), c.dim(2), c.dim(3), c.dim(4), 1};
      }
      const std::string before = cache_expected();  // from dims 0 and 1, which rank 4+ keep
      in_.kv_cache = reshaped(c, shape);
      const std::string got = shape_repr(in_.kv_cache.shape());
      strict(R::kv_cache_rank, "kv_cache.shape=" + got + " must have rank 5.");
      if (hd64_) {
        native(R::kv_cache_rank, v < 2
                                     ? "ValueError: not enough values to unpack (expected 5, got " +
                                           I(static_cast<int64_t>(shape.size())) + ")"
                                     : "ValueError: too many values to unpack (expected 5)");
      } else if (v == 0) {
        native(R::kv_cache_rank, "IndexError: tuple index out of range");
      } else {
        native(R::kv_cache_shape, "Expected kv_cache.shape=" + got +
                                      " to be equal to expected_kv_cache_shape=" + before);
      }
      return;
    }
    case V3MutationKind::kv_cache_shape: {
      const Tensor& c = in_.kv_cache;
      Shape shape = c.shape();
      const int64_t v = variant(3);
      if (v == 0) shape[4] += 128;
      if (v == 1) shape[2] += 1;
      if (v == 2) shape[3] *= 2;
      const std::string expected = cache_expected();
      in_.kv_cache = Tensor(c.dtype(), shape);
      both(R::kv_cache_shape, "Expected kv_cache.shape=" + shape_repr(shape) +
                                  " to be equal to expected_kv_cache_shape=" + expected);
      return;
    }
    case V3MutationKind::kv_cache_last_dim: {
      Shape shape = in_.kv_cache.shape();
      shape[4] = variant(2) == 0 ? 256 : 64;
      in_.kv_cache = Tensor(in_.kv_cache.dtype(), shape);
      both(R::kv_cache_last_dim, "Expected actual_head_dim_x2=" + I(shape[4]) + " is equal to 128");
      return;
    }
    case V3MutationKind::kv_dtype_mismatch: {
      const int64_t v = variant(3);
      if (v == 2 && s_.kv_dtype == DType::kFloat32) {
        // float64 new keys and values: float32 to native mode.
        in_.keys = Tensor(DType::kFloat64, in_.keys.shape());
        in_.values = Tensor(DType::kFloat64, in_.values.shape());
      } else {
        const DType other = s_.kv_dtype == DType::kFloat32 ? DType::kBFloat16 : DType::kFloat32;
        Tensor& t = v == 1 ? in_.values : in_.keys;
        t = Tensor(other, t.shape());
      }
      const auto msg = [&](DType k, DType vv) {
        return "Expected kv_cache.dtype=" + Dt(s_.kv_dtype) + " to be equal to k.dtype=" + Dt(k) +
               " and v.dtype=" + Dt(vv) + ".";
      };
      const DType kt = in_.keys.dtype(), vt = in_.values.dtype();
      if (!(native_view(kt) == s_.kv_dtype && native_view(vt) == s_.kv_dtype)) {
        native(R::kv_dtype_mismatch, msg(native_view(kt), native_view(vt)));
      }
      strict(R::kv_dtype_mismatch, msg(kt, vt));
      return;
    }
    case V3MutationKind::kv_packing_mismatch: {
      Shape shape = in_.kv_cache.shape();
      shape[3] = variant(2) == 0 ? 2 * P() : P() + 1;
      in_.kv_cache = Tensor(in_.kv_cache.dtype(), shape);
      both(R::kv_packing_mismatch,
           "kv_packing=" + I(shape[3]) + " does not match with kv_cache.dtype=" + Dt(s_.kv_dtype));
      return;
    }
    case V3MutationKind::kv_cache_heads: {
      Shape shape = in_.kv_cache.shape();
      shape[2] = variant(2) == 0 ? shape[2] + 1 : shape[2] - 1;
      in_.kv_cache = Tensor(in_.kv_cache.dtype(), shape);
      both(R::kv_cache_heads, "Invalid num_kv_heads=" + I(shape[2] * P()) +
                                  ", actual_num_kv_heads=" + I(Hkv()) + ", kv_packing=" + I(P()));
      return;
    }
    case V3MutationKind::q_heads_zero:
      in_.queries = Tensor(in_.queries.dtype(), {T(), 0, D()});
      if (in_.attention_sink) in_.attention_sink = Tensor(DType::kFloat32, {0});
      strict(R::q_heads_zero, "num_q_heads=0 must be positive.");
      return;
    case V3MutationKind::head_dim_zero: {
      for (Tensor* t : {&in_.queries, &in_.keys, &in_.values}) {
        *t = Tensor(t->dtype(), {t->dim(0), t->dim(1), 0});
      }
      Shape shape = in_.kv_cache.shape();
      shape[4] = 0;  // align(0, 128)
      in_.kv_cache = Tensor(in_.kv_cache.dtype(), shape);
      strict(R::head_dim_zero, "head_dim=0 must be positive.");
      // kernel.py's validators take it; its kernel cannot trace it (finding 27), which native
      // mode reports after every other rule, as the kernel traces after them.
      native(R::head_dim_zero,
             "ZeroDivisionError at trace: head_dim=0 (strided_load: integer modulo by zero)",
             rank_of(R::sink_group_unpacked) + 1);
      return;
    }
    case V3MutationKind::sink_nonfinite: {
      if (!in_.attention_sink) in_.attention_sink = Tensor(DType::kFloat32, {Hq()});
      const int64_t h = rest(3) % Hq();
      static const double values[] = {kNaN, kInf, -kInf};
      const double x = values[variant(3)];
      in_.attention_sink->set_float(h, x);
      // The first NaN or +inf in head order: generated sinks hold finite values and -inf.
      if (variant(3) < 2) {
        strict(R::sink_nonfinite,
               "attention_sink[" + I(h) + "]=" + F(x) + " must not be NaN or +inf.");
      }
      return;
    }
    case V3MutationKind::q_dtype_unsupported: {
      static const DType dtypes[] = {DType::kFloat8E4M3FN, DType::kInt32, DType::kFloat16,
                                     DType::kFloat64, DType::kFloat8E5M2};
      const DType t = dtypes[variant(5)];
      in_.queries = Tensor(t, in_.queries.shape());
      strict(R::q_dtype_unsupported, "q.dtype=" + Dt(t) + " must be float32 or bfloat16.");
      // Natively float16 traces, and float64 is float32; an explicit out_dtype (q's old
      // default) then fails at trace if its width differs from the new default's.
      const DType nq = native_view(t);
      if (!(nq == DType::kFloat32 || dtype_bits(nq) == 16)) {
        native(R::q_dtype_unsupported, "TypeError at trace: q.dtype=" + Dt(nq) +
                                           " (the kernel computes q in float32 or bfloat16)");
        return;
      }
      const DType def = nq == DType::kFloat32 ? DType::kFloat32 : DType::kBFloat16;
      if (!hd64_ && p_.out_dtype && dtype_bits(*p_.out_dtype) != dtype_bits(def)) {
        native(R::out_dtype_not_default, "TypeError at trace: out_dtype=" + Dt(*p_.out_dtype) +
                                             " must be the default " + Dt(def) +
                                             " for q.dtype=" + Dt(nq) + ".");
      }
      return;
    }
    case V3MutationKind::sink_group_unpacked: {
      // bfloat16 q (v3_mutation_applies): 1 or 3 q heads per kv head, with a sink per q head
      // (zeros: finite).
      const int64_t group = variant(2) == 0 ? 1 : 3;
      const int64_t hq = Hkv() * group;
      in_.queries = Tensor(in_.queries.dtype(), {in_.queries.dim(0), hq, in_.queries.dim(2)});
      in_.attention_sink = Tensor(DType::kFloat32, {hq});
      return;  // declare_sink_group declares both modes' verdicts
    }
    default:
      std::abort();  // Mutator::apply sends only this family here
  }
}

// The index arrays (kv_lens, page_indices, cu_q_lens, distribution): dtypes, shapes,
// the sequences' order and lengths, and the pages they name.
void Mutator::apply_metadata(V3MutationKind kind) {
  using R = V3RuleId;
  switch (kind) {
    case V3MutationKind::index_dtype: {
      static const DType dtypes[] = {DType::kUInt32, DType::kInt16, DType::kFloat32, DType::kInt64};
      const DType t = dtypes[variant(4)];
      Tensor* arrays[] = {&in_.kv_lens, &in_.page_indices, &in_.cu_q_lens, &in_.distribution};
      Tensor& a = *arrays[rest(4) % 4];
      a = retyped_index(a, t);
      const auto msg = [&](auto view) {
        return "Expected int32 dtype for kv_lens.dtype=" + Dt(view(in_.kv_lens.dtype())) +
               ", page_indices.dtype=" + Dt(view(in_.page_indices.dtype())) +
               ", cu_q_lens.dtype=" + Dt(view(in_.cu_q_lens.dtype())) +
               ", distribution.dtype=" + Dt(view(in_.distribution.dtype()));
      };
      // int64 indices are int32 to native mode, with the same (small) values.
      if (native_view(t) != DType::kInt32) {
        native(R::index_dtype, msg([](DType d) { return native_view(d); }));
      }
      strict(R::index_dtype, msg([](DType d) { return d; }));
      return;
    }
    case V3MutationKind::index_rank: {
      const int64_t v = variant(3);
      if (v == 0) in_.page_indices = reshaped(in_.page_indices, {N(), pps()});
      if (v == 1) in_.kv_lens = reshaped(in_.kv_lens, {N(), 1});
      if (v == 2) in_.cu_q_lens = reshaped(in_.cu_q_lens, {N() + 1, 1});
      both(R::index_rank, "Expected 1D array for kv_lens.shape=" + shape_repr(in_.kv_lens.shape()) +
                              ", page_indices.shape=" + shape_repr(in_.page_indices.shape()) +
                              ", cu_q_lens.shape=" + shape_repr(in_.cu_q_lens.shape()));
      return;
    }
    case V3MutationKind::max_num_seqs_zero:
      in_.kv_lens = Tensor(DType::kInt32, {0});
      native(R::max_num_seqs_zero, "ZeroDivisionError: integer modulo by zero");
      strict(R::max_num_seqs_zero, "max_num_seqs=0 must be positive.");
      return;
    case V3MutationKind::page_indices_not_divisible: {
      const int64_t len = N() * pps() + (variant(2) == 0 ? 1 : -1);
      in_.page_indices = Tensor(DType::kInt32, {len});
      both(R::page_indices_not_divisible, "Expected num_page_indices=" + I(len) +
                                              " to be divisible by max_num_seqs=" + I(N()) + ".");
      return;
    }
    case V3MutationKind::cu_q_lens_shape: {
      const int64_t len = variant(2) == 0 ? N() + 2 : N();
      in_.cu_q_lens = Tensor(DType::kInt32, {len});
      both(R::cu_q_lens_shape,
           "Expected cu_q_lens.shape=(" + I(len) + ",) to be (" + I(N() + 1) + ",).");
      return;
    }
    case V3MutationKind::distribution_shape: {
      static const Shape shapes[] = {{4}, {2}, {3, 1}, {}};
      const Shape shape = shapes[variant(4)];
      in_.distribution = Tensor(DType::kInt32, shape);
      both(R::distribution_shape,
           "Expected distribution.shape=" + shape_repr(shape) + " to be (3,).");
      return;
    }
    case V3MutationKind::page_size_packing: {
      Shape shape = in_.kv_cache.shape();
      shape[1] = variant(2) == 0 ? ps() + 1 : ps() - 1;
      in_.kv_cache = Tensor(in_.kv_cache.dtype(), shape);
      both(R::page_size_packing,
           "page_size=" + I(shape[1]) + " must be divisible by kv_packing=" + I(P()) + ".");
      return;
    }
    case V3MutationKind::page_size_zero: {
      Shape shape = in_.kv_cache.shape();
      shape[1] = 0;
      in_.kv_cache = Tensor(in_.kv_cache.dtype(), shape);
      // Strict names it once, right after the scalar options.
      strict(R::page_size_zero, "page_size=0 must be positive.",
             rank_of(R::chunk_prefill_nonpositive) + 1);
      if (!hd64_ && (p_.d_block_sizes || p_.p_block_sizes || p_.m_block_sizes)) {
        // kernel.py: bkv_sz % page_size in the first named tuple, after its first two checks.
        native(R::page_size_zero, "ZeroDivisionError: integer modulo by zero");
      } else if (k() > 0) {
        // hd64, and kernel.py leaving every tuple to its defaults (a production call; checked
        // against tpu-inference 0.32.0: cdiv asserts): cdiv(kv_len, page_size) asserts in
        // sequence 0's dynamic checks.
        native(R::page_size_zero, "AssertionError", rank_of(R::q_len_range) + 1);
      }
      return;
    }
    case V3MutationKind::distribution_order: {
      std::vector<int64_t> d = {d0(), d1(), k()};
      if (variant(2) == 0) {
        d[0] = d[1] + 1;
      } else {
        d[1] = d[2] + 1;
      }
      for (int e = 0; e < 3; ++e) in_.distribution.set_int(e, d[static_cast<size_t>(e)]);
      both(R::distribution_order, "Invalid distribution: distribution=" + jax_vector(d));
      return;
    }
    case V3MutationKind::num_seqs_too_large: {
      const int64_t n = N() + 1;
      if (variant(2) == 1) {
        in_.distribution.set_int(0, n);
        in_.distribution.set_int(1, n);
      }
      in_.distribution.set_int(2, n);
      both(R::num_seqs_too_large, "num_seqs=" + I(n) + " must be <= max_num_seqs=" + I(N()));
      return;
    }
    case V3MutationKind::distribution_negative: {
      const int64_t i = -1 - variant(3);
      in_.distribution.set_int(0, i);
      strict(R::distribution_negative,
             "distribution=(" + I(i) + ", " + I(d1()) + ", " + I(k()) + ") must be non-negative.");
      return;
    }
    case V3MutationKind::prefill_without_chunk_size:
      p_.chunk_prefill_size = std::nullopt;
      strict(R::prefill_without_chunk_size,
             "sequences [" + I(d0()) + ", " + I(d1()) +
                 ") are in the prefill range, which kernel.py runs only with chunk_prefill_size.");
      return;
    case V3MutationKind::cu_q_lens_first_nonzero: {
      const int64_t first = variant(2) == 0 ? 1 : -1;
      in_.cu_q_lens.set_int(0, first);
      strict(R::cu_q_lens_first_nonzero, "cu_q_lens[0]=" + I(first) + " must be 0.");
      // Natively only sequence 0's q_len changes.
      if (!(0 < q_len(0) && q_len(0) <= kv(0))) {
        native(R::q_len_range, "Require 0 < q_len=" + jax_scalar(q_len(0)) +
                                   " <= kv_len=" + jax_scalar(kv(0)) + " at sequence 0.");
      }
      return;
    }
    case V3MutationKind::cu_q_lens_decreasing: {
      const int64_t s = arg_ % k();
      in_.cu_q_lens.set_int(s + 1, cu(s) - 1);
      strict(R::cu_q_lens_decreasing, "cu_q_lens[" + I(s + 1) + "]=" + I(cu(s + 1)) +
                                          " must be >= cu_q_lens[" + I(s) + "]=" + I(cu(s)) + ".");
      native(R::q_len_range, "Require 0 < q_len=" + jax_scalar(-1) +
                                 " <= kv_len=" + jax_scalar(kv(s)) + " at sequence " + I(s) + ".");
      return;
    }
    case V3MutationKind::total_q_tokens_too_large: {
      const int64_t total = cu(k());
      resize_tokens(variant(2) == 0 ? total - 1 : total);
      if (variant(2) == 0) {
        both(R::total_q_tokens_too_large,
             "Total q tokens " + I(total) + " must be <= max_num_tokens=" + I(total - 1) + ".");
      }
      return;
    }
    case V3MutationKind::q_len_range: {
      const int64_t s = rest(2) % k();
      in_.kv_lens.set_int(s, variant(2) == 0 ? q_len(s) - 1 : -1);
      both(R::q_len_range, "Require 0 < q_len=" + jax_scalar(q_len(s)) +
                               " <= kv_len=" + jax_scalar(kv(s)) + " at sequence " + I(s) + ".");
      return;
    }
    case V3MutationKind::decode_q_len_not_one: {
      // A decode sequence with kv_len >= 2 gets q_len 2 (native has no decode rule).
      std::vector<int64_t> candidates;
      for (int64_t i = 0; i < d0(); ++i) {
        if (kv(i) >= 2) candidates.push_back(i);
      }
      const int64_t s = candidates[static_cast<size_t>(arg_) % candidates.size()];
      shift_rows_after(s, 1);
      strict(R::decode_q_len_not_one,
             "sequence " + I(s) + " is in the decode range, so q_len=2 must be 1.");
      return;
    }
    case V3MutationKind::prefill_q_len_not_chunk: {
      const int64_t c = *p_.chunk_prefill_size;
      std::vector<int64_t> candidates;
      for (int64_t i = d0(); i < d1(); ++i) {
        if (c >= 2 || kv(i) >= 2) candidates.push_back(i);
      }
      const int64_t s = candidates[static_cast<size_t>(arg_) % candidates.size()];
      const int64_t q = c >= 2 ? c - 1 : 2;
      shift_rows_after(s, q - c);
      strict(R::prefill_q_len_not_chunk, "sequence " + I(s) +
                                             " is in the prefill range, so q_len=" + I(q) +
                                             " must be chunk_prefill_size=" + I(c) + ".");
      return;
    }
    case V3MutationKind::page_count_too_large: {
      const int64_t s = arg_ % k();
      in_.kv_lens.set_int(s, pps() * ps() + 1);
      both(R::page_count_too_large, "Require page_cnt=" + jax_scalar(pps() + 1) +
                                        " <= pages_per_seq=" + I(pps()) + where(s));
      return;
    }
    case V3MutationKind::page_index_out_of_range: {
      const int64_t v = variant(4);
      const int64_t s = rest(4) % k();
      const int64_t used = (kv(s) + ps() - 1) / ps();
      const int64_t page = rest(4) / k() % used;
      const int64_t pages = in_.kv_cache.dim(0);
      // Just inside: the last page, unless another used page slot maps it (strict's
      // update_page_shared would then judge the sharing); else the slot keeps its page.
      bool last_mapped = false;
      for (int64_t i = 0; i < k(); ++i) {
        for (int64_t j = 0; j * ps() < kv(i); ++j) {
          last_mapped |= (i != s || j != page) && in_.page_indices.int_at(i * pps() + j) == pages - 1;
        }
      }
      const int64_t inside = last_mapped ? in_.page_indices.int_at(s * pps() + page) : pages - 1;
      const int64_t values[] = {pages, -1, kInt32Max, inside};
      in_.page_indices.set_int(s * pps() + page, values[v]);
      if (v < 3) {
        both(R::page_index_out_of_range, "Require 0 <= page_idx=" + jax_scalar(values[v]) +
                                             " < total_num_pages=" + I(pages) + where(s));
      }
      return;
    }
    case V3MutationKind::kv_len_overflows_int32: {
      // The kv block in force grows to just past (variant 0) or just inside (1) the int32
      // bound for the longest sequence of its pass.
      const bool past = variant(2) == 0;
      const auto fitted = [&](int64_t unit, int64_t longest) {
        // past: the least multiple of unit with longest + bkv - 1 > INT32_MAX; inside: the
        // greatest with longest + bkv - 1 <= INT32_MAX.
        const int64_t room = kInt32Max + 1 - longest;  // bkv <= room fits
        return past ? (room / unit + 1) * unit : room / unit * unit;
      };
      const auto longest_in = [&](auto same_pass) {
        int64_t m = 1;
        for (int64_t i = 0; i < k(); ++i) {
          if (same_pass(i)) m = std::max(m, kv(i));
        }
        return m;
      };
      if (hd64_) {
        const int64_t bkv = fitted(ps(), longest_in([](int64_t) { return true; }));
        p_.num_kv_pages_per_block = bkv / ps();
      } else {
        for (int t = 0; t < 3; ++t) {
          V3BlockSizes& b = *tuple(t);
          const std::optional<V3BlockSizes>* mine = &tuple(t);
          b[1] = fitted(b[3], longest_in([&](int64_t i) { return &pass_blocks(i) == mine; }));
        }
      }
      for (int64_t i = 0; i < k(); ++i) {
        const int64_t bkv = hd64_ ? *p_.num_kv_pages_per_block * ps() : (*pass_blocks(i))[1];
        if (kv(i) + bkv - 1 > kInt32Max) {
          strict(R::kv_len_overflows_int32, "kv_len=" + I(kv(i)) + " at sequence " + I(i) +
                                                ": kv_len + " + I(bkv) + " - 1 must fit in int32.");
          break;
        }
      }
      return;
    }
    case V3MutationKind::update_page_shared: {
      // Used page slot (j, q), any but sequence s's last, maps the page that receives s's
      // last new token (in range, so native stays valid). The validator walks the sequences'
      // new-token slots in order and names the first on a page mapped twice: (s, last), or
      // (j, q) when that slot also receives new tokens and comes first; the other is the
      // page's other mapping.
      using Slot = std::pair<int64_t, int64_t>;
      const int64_t s = arg_ % k();
      const Slot last{s, (kv(s) - 1) / ps()};
      std::vector<Slot> others;
      for (int64_t i = 0; i < k(); ++i) {
        for (int64_t j = 0; j * ps() < kv(i); ++j) {
          if (Slot{i, j} != last) others.push_back({i, j});
        }
      }
      const Slot slot = others[static_cast<size_t>(rest(k()) % static_cast<int64_t>(others.size()))];
      const int64_t page = in_.page_indices.int_at(s * pps() + last.second);
      in_.page_indices.set_int(slot.first * pps() + slot.second, page);
      const bool slot_new = slot.second >= (kv(slot.first) - q_len(slot.first)) / ps();
      const auto [named, other] = slot_new && slot < last ? std::pair{slot, last} : std::pair{last, slot};
      strict(R::update_page_shared, "page " + I(page) + " receives new tokens of sequence " +
                                        I(named.first) + " (page slot " + I(named.second) +
                                        ") and is also page slot " + I(other.second) +
                                        " of sequence " + I(other.first) + ".");
      return;
    }
    default:
      std::abort();  // Mutator::apply sends only this family here
  }
}

// The block sizes (kernel.py's tuples, hd64's pages and queries per block) and the
// kernel program's rules on them (the skip mask, the masked block, the cache write).
void Mutator::apply_blocks(V3MutationKind kind) {
  using R = V3RuleId;
  switch (kind) {
    case V3MutationKind::block_bq_sizes: {
      int t = 0;
      V3BlockSizes& b = some_tuple(rest(3), t);
      const int64_t v = variant(3);
      b[2] = v == 0 ? 0 : (v == 1 ? b[0] + 1 : -1);
      both(R::block_bq_sizes, tuple_name(t) + " bq_csz=" + I(b[2]) + " and bq_sz=" + I(b[0]) +
                                  " must satisfy (0 < bq_csz and bq_sz % bq_csz == 0).");
      return;
    }
    case V3MutationKind::block_bkv_sizes: {
      int t = 0;
      V3BlockSizes& b = some_tuple(rest(3), t);
      const int64_t v = variant(3);
      b[3] = v == 0 ? 0 : (v == 1 ? b[1] + ps() : -ps());
      both(R::block_bkv_sizes, tuple_name(t) + " bkv_csz=" + I(b[3]) + " and bkv_sz=" + I(b[1]) +
                                   " must satisfy (0 < bkv_csz and bkv_sz % bkv_csz == 0).");
      return;
    }
    case V3MutationKind::block_bkv_page: {
      int t = 0;
      V3BlockSizes& b = some_tuple(rest(2), t);
      if (variant(2) == 0) {
        b[3] = 1;
        b[1] = ps() + 1;
      } else {
        b[3] = b[1] = ps() - 1;
      }
      both(R::block_bkv_page, tuple_name(t) + " bkv_sz=" + I(b[1]) +
                                  " must be divisible by page_size=" + I(ps()) + ".");
      return;
    }
    case V3MutationKind::block_bkv_csz_page: {
      int t = 0;
      V3BlockSizes& b = some_tuple(rest(2), t);
      if (variant(2) == 0) {
        b[3] = 1;
      } else {
        b[3] = ps() + 1;
        b[1] = ps() * (ps() + 1);
      }
      both(R::block_bkv_csz_page, tuple_name(t) + " bkv_csz=" + I(b[3]) +
                                      " must be divisible by page_size=" + I(ps()) + ".");
      return;
    }
    case V3MutationKind::kv_pages_per_block_nonpositive: {
      static const int64_t values[] = {0, -1, 1};
      p_.num_kv_pages_per_block = values[variant(3)];
      if (variant(3) < 2) {
        both(R::kv_pages_per_block_nonpositive,
             "num_kv_pages_per_block=" + I(*p_.num_kv_pages_per_block) + " must be positive.");
      }
      return;
    }
    case V3MutationKind::queries_per_block_nonpositive: {
      static const int64_t values[] = {0, -1, 1};
      p_.num_queries_per_block = values[variant(3)];
      if (variant(3) < 2) {
        both(R::queries_per_block_nonpositive,
             "num_queries_per_block=" + I(*p_.num_queries_per_block) + " must be positive.");
      }
      return;
    }
    case V3MutationKind::block_size_nonpositive: {
      int t = 0;
      V3BlockSizes& b = some_tuple(rest(3), t);
      const int64_t v = variant(3);
      if (v == 0) b[0] = 0;
      if (v == 1) b[1] = 0;
      if (v == 2) b[0] = -b[2];
      strict(R::block_size_nonpositive,
             tuple_name(t) + " bq_sz=" + I(b[0]) + " and bkv_sz=" + I(b[1]) + " must be positive.");
      return;
    }
    case V3MutationKind::skip_kv_mask_block_unknown:
      p_.use_causal_mask = false;
      p_.skip_kv_mask = true;
      pass_blocks(0) = std::nullopt;
      strict(R::skip_kv_mask_block_unknown, "skip_kv_mask needs " + std::string(pass_letter(0)) +
                                                "_block_sizes: sequence 0's kv_len must be a "
                                                "multiple of its bkv_csz.");
      return;
    case V3MutationKind::skip_kv_mask_kv_len: {
      p_.use_causal_mask = false;
      p_.skip_kv_mask = true;
      if (variant(2) == 0) {
        // Sequence 0's kv compute block: whole pages, longer than its kv_len.
        V3BlockSizes& b = *pass_blocks(0);
        b[3] = b[1] = ps() * (kv(0) / ps() + 1);
      }
      // The first sequence whose kv_len is not whole kv compute blocks of its pass.
      for (int64_t i = 0; i < k(); ++i) {
        const int64_t csz = (*pass_blocks(i))[3];
        if (kv(i) % csz != 0) {
          strict(R::skip_kv_mask_kv_len, "skip_kv_mask: kv_len=" + I(kv(i)) + " at sequence " +
                                             I(i) + " must be a multiple of bkv_csz=" + I(csz) +
                                             ".");
          break;
        }
      }
      return;
    }
    case V3MutationKind::masked_block_overflows:
      // Finding 23: sequence 0's pass in query blocks of one row, KV blocks covering its
      // kv_len, compute blocks of one page, a window of 1 and mask_value -1e30 (bfloat16
      // -202 x 2^92, away from zero): each row from position page_size on sees only its own
      // key, past the first compute block [0, page_size). declare_window_rules declares it.
      p_.mask_value = -1e30;
      p_.sliding_window = 1;
      pass_blocks(0) = V3BlockSizes{1, (kv(0) + ps() - 1) / ps() * ps(), 1, ps()};
      return;
    case V3MutationKind::window_skips_cache_write:
      // Finding 24: the pass of the first sequence past the decode range whose new tokens
      // start a page before its last row's in query blocks of one row and KV blocks of one
      // page, with a window of 1 and the fused update on (skip_kv_mask off, which is always
      // valid): its last row reads from the page before its own token, later than the page
      // of its first new token (v3_mutation_applies).
      // declare_window_rules declares it.
      p_.mask_value.reset();
      p_.sliding_window = 1;
      p_.update_kv_cache = true;
      p_.skip_kv_mask = false;
      for (int64_t i = d0(); i < k(); ++i) {
        if ((kv(i) - q_len(i)) / ps() < (kv(i) - 2) / ps()) {
          pass_blocks(i) = V3BlockSizes{1, ps(), 1, ps()};
          break;
        }
      }
      return;
    default:
      std::abort();  // Mutator::apply sends only this family here
  }
}

// The scalar keywords, one group each (window, soft cap, chunk, VMEM, the scales, the
// mask value): values they may not take, and the window's integer wraps.
void Mutator::apply_keywords(V3MutationKind kind) {
  using R = V3RuleId;
  switch (kind) {
    case V3MutationKind::sliding_window_nonpositive: {
      static const int64_t windows[] = {0, -1, -(int64_t{1} << 31), 1};
      p_.sliding_window = windows[variant(4)];
      if (*p_.sliding_window <= 0) {
        both(R::sliding_window_nonpositive,
             "sliding_window=" + I(*p_.sliding_window) + " must be positive.");
      }
      return;
    }
    case V3MutationKind::soft_cap_zero: {
      // 5e-324 passes tpu-inference's == 0.0 but is 0.0 as a float32, -1e-40 subnormal there
      // (strict: float32_scalar flushes both); 2^-126, the least normal float32, is inside.
      static const double caps[] = {0.0, -0.0, 5e-324, -1e-40, 0x1p-126};
      p_.soft_cap = caps[variant(5)];
      if (*p_.soft_cap == 0.0) {
        both(R::soft_cap_zero, "soft_cap=" + F(*p_.soft_cap) + " must not be 0.0.");
      } else if (float32_scalar(*p_.soft_cap) == 0.0f) {
        strict(R::soft_cap_zero, soft_cap_flushed_message(*p_.soft_cap));
      }
      return;
    }
    case V3MutationKind::chunk_prefill_nonpositive:
      p_.chunk_prefill_size = variant(2) == 0 ? 0 : -1;
      both(R::chunk_prefill_nonpositive,
           "chunk_prefill_size=" + I(*p_.chunk_prefill_size) + " must be positive.");
      return;
    case V3MutationKind::vmem_limit_nonpositive: {
      static const int64_t values[] = {0, -1, 1};
      p_.vmem_limit_bytes = values[variant(3)];
      if (variant(3) < 2) {
        both(R::vmem_limit_nonpositive,
             "vmem_limit_bytes=" + I(*p_.vmem_limit_bytes) + " must be positive.");
      }
      return;
    }
    case V3MutationKind::sliding_window_too_large: {
      static const int64_t windows[] = {int64_t{1} << 31, std::numeric_limits<int64_t>::max(),
                                        kInt32Max};
      p_.sliding_window = windows[variant(3)];
      if (variant(3) < 2) {
        strict(R::sliding_window_too_large,
               "sliding_window=" + I(*p_.sliding_window) + " must fit in int32.");
      }
      return;
    }
    case V3MutationKind::soft_cap_nonfinite:
      finite_rule(R::soft_cap_nonfinite, "soft_cap", p_.soft_cap);
      return;
    case V3MutationKind::sm_scale_nonfinite:
      finite_rule(R::sm_scale_nonfinite, "sm_scale", p_.sm_scale);
      return;
    case V3MutationKind::q_scale_invalid: {
      // 1e-46 is 0 as a float32, 1e-45 its smallest subnormal, 2^-127 its largest half: all
      // 0 to a TPU; 2^-126, the least normal, is just inside.
      static const double values[] = {kNaN, kInf, 0.0, 1e-46, -0.0, 1e-45, 0x1p-127, 0x1p-126};
      p_.q_scale = values[variant(8)];
      if (variant(8) < 7) {
        strict(R::q_scale_invalid, "q_scale=" + F(*p_.q_scale) +
                                       " must be finite, nonzero and not subnormal as a float32.");
      }
      return;
    }
    case V3MutationKind::k_scale_nonfinite:
      finite_rule(R::k_scale_nonfinite, "k_scale", p_.k_scale);
      return;
    case V3MutationKind::v_scale_nonfinite:
      finite_rule(R::v_scale_nonfinite, "v_scale", p_.v_scale);
      return;
    case V3MutationKind::mask_value_nonfinite: {
      static const double values[] = {kNaN, -kInf, kInf, -1e39, -kFloat32Max};
      p_.mask_value = values[variant(5)];
      if (variant(5) < 4) {
        strict(R::mask_value_nonfinite,
               "mask_value=" + F(*p_.mask_value) + " must be finite as a float32.");
      }
      return;
    }
    case V3MutationKind::mask_value_too_large: {
      static const double values[] = {-1e29, 0.0, 1.0, -9.999999999999999e29, -1e30};
      p_.mask_value = values[variant(5)];
      if (variant(5) < 4) {
        strict(R::mask_value_too_large,
               "mask_value=" + F(*p_.mask_value) + " must be at most -1e+30.");
      }
      return;
    }
    case V3MutationKind::window_int16_wraps: {
      // Finding 25: windows around kernel.py's int16 limit for the longest sequence L
      // (bfloat16 q and pages_per_seq * page_size <= 32767: v3_mutation_applies): 32769 - L
      // (its last key + W is 32768), 32768 - L (just inside), 65536 + L - 1 (W wraps to
      // L - 1: its last row loses key 0), 65536 + L (just inside: W wraps to L, every key
      // kept), 40000 (W wraps negative). After a kShape mutation kv_lens may be no int32
      // vector: then L = 1. declare_window_wraps declares it.
      int64_t longest = 1;
      if (in_.kv_lens.dtype() == DType::kInt32 && in_.kv_lens.rank() == 1) {
        for (int64_t i = 0; i < std::min(k(), in_.kv_lens.numel()); ++i) {
          longest = std::max(longest, kv(i));
        }
      }
      longest = std::min<int64_t>(longest, 32767);
      const int64_t windows[] = {32769 - longest, 32768 - longest, 65535 + longest,
                                 65536 + longest, 40000};
      p_.sliding_window = windows[variant(5)];
      return;
    }
    case V3MutationKind::window_int32_wraps: {
      // Finding 26: windows around kernel.py's int32 limit for the longest sequence L (any
      // kernel.py call; bfloat16 calls with int16 positions meet window_int16_wraps first):
      // 2^31 - L + 1 (its last key + W is 2^31: wraps), 2^31 - L (just inside), INT32_MAX
      // (every key past 0 wraps). After a kShape mutation kv_lens may be no int32 vector:
      // then L = 1. declare_window_wraps declares it.
      int64_t longest = 1;
      if (in_.kv_lens.dtype() == DType::kInt32 && in_.kv_lens.rank() == 1) {
        for (int64_t i = 0; i < std::min(k(), in_.kv_lens.numel()); ++i) {
          longest = std::max(longest, kv(i));
        }
      }
      const int64_t windows[] = {std::min(kInt32Max, kInt32Max + 2 - longest),
                                 kInt32Max + 1 - longest, kInt32Max};
      p_.sliding_window = windows[variant(3)];
      return;
    }
    default:
      std::abort();  // Mutator::apply sends only this family here
  }
}

bool pick(const V3CaseSpec& s, bool (*pred)(const V3CaseSpec&, int64_t), int64_t from, int64_t to) {
  for (int64_t i = from; i < to; ++i) {
    if (pred(s, i)) return true;
  }
  return false;
}

}  // namespace

std::span<const V3MutationKind> all_v3_mutation_kinds() { return kAllKinds; }
std::string_view v3_mutation_name(V3MutationKind k) { return info(k).name; }
V3MutationGroup v3_mutation_group(V3MutationKind k) { return info(k).group; }
V3RuleId v3_mutation_rule(V3MutationKind k) { return info(k).rule; }

bool v3_mutation_in_dialect(V3MutationKind k, Dialect d) {
  if (d == Dialect::kTpuInferenceV3) return info(k).v3;
  if (d == Dialect::kTpuInferenceV3Hd64) return info(k).hd64;
  return false;
}

bool v3_mutation_applies(V3MutationKind kind, const V3CaseSpec& s) {
  if (!v3_mutation_in_dialect(kind, s.dialect)) return false;
  const int64_t k = s.num_seqs();
  // The mutations that edit kernel.py's block tuples need the call to name all three, as the
  // generator's calls do; a production call leaves them to the kernel's defaults.
  const V3Params& p = s.params;
  const bool named_blocks = s.dialect == Dialect::kTpuInferenceV3Hd64 ||
                            (p.d_block_sizes && p.p_block_sizes && p.m_block_sizes);
  switch (kind) {
    case V3MutationKind::block_bq_sizes:
    case V3MutationKind::block_bkv_sizes:
    case V3MutationKind::block_size_nonpositive:
    case V3MutationKind::skip_kv_mask_kv_len:
    case V3MutationKind::block_bkv_page:
    case V3MutationKind::block_bkv_csz_page:
    case V3MutationKind::kv_len_overflows_int32:
      if (!named_blocks) return false;
      break;
    default:
      break;
  }
  const bool float8 = s.kv_dtype == DType::kFloat8E4M3FN || s.kv_dtype == DType::kFloat8E5M2;
  switch (kind) {
    case V3MutationKind::dtype_pair:
      return !float8;
    case V3MutationKind::page_indices_not_divisible:
      return s.max_num_seqs() >= 2;
    case V3MutationKind::sink_group_unpacked:
      return s.q_dtype == DType::kBFloat16;
    case V3MutationKind::page_size_packing:
      return v3_kv_packing(s.kv_dtype) > 1;
    case V3MutationKind::block_bkv_page:
    case V3MutationKind::block_bkv_csz_page:
      return s.page_size >= 2;
    case V3MutationKind::prefill_without_chunk_size:
      return s.num_prefill > 0;
    case V3MutationKind::update_page_shared: {
      // kernel.py writes nothing with update_kv_cache=False; two used page slots at least.
      int64_t slots = 0;
      for (const V3SeqSpec& q : s.seqs) slots += (q.kv_len + s.page_size - 1) / s.page_size;
      return (s.dialect == Dialect::kTpuInferenceV3Hd64 || s.params.update_kv_cache) && slots >= 2;
    }
    case V3MutationKind::cu_q_lens_first_nonzero:
    case V3MutationKind::cu_q_lens_decreasing:
    case V3MutationKind::total_q_tokens_too_large:
    case V3MutationKind::q_len_range:
    case V3MutationKind::page_count_too_large:
    case V3MutationKind::page_index_out_of_range:
    case V3MutationKind::kv_len_overflows_int32:
    case V3MutationKind::skip_kv_mask_block_unknown:
    case V3MutationKind::skip_kv_mask_kv_len:
      return k > 0;
    case V3MutationKind::masked_block_overflows:
      return s.dialect == Dialect::kTpuInferenceV3 && s.q_dtype == DType::kBFloat16 &&
             !s.params.skip_kv_mask &&
             (!s.params.out_dtype || *s.params.out_dtype == DType::kBFloat16) && k > 0 &&
             s.seqs[0].kv_len > s.page_size;
    case V3MutationKind::window_skips_cache_write: {
      if (s.dialect != Dialect::kTpuInferenceV3 || s.num_decode >= k) return false;
      return std::any_of(s.seqs.begin() + s.num_decode, s.seqs.end(), [&](const V3SeqSpec& q) {
        return q.kv_len >= 2 && (q.kv_len - q.q_len) / s.page_size < (q.kv_len - 2) / s.page_size;
      });
    }
    case V3MutationKind::window_int16_wraps:
      return s.q_dtype == DType::kBFloat16 && k > 0 && s.pages_per_seq() * s.page_size <= 32767;
    case V3MutationKind::window_int32_wraps:
      return k > 0;
    case V3MutationKind::decode_q_len_not_one:
      return pick(
          s,
          [](const V3CaseSpec& c, int64_t i) { return c.seqs[static_cast<size_t>(i)].kv_len >= 2; },
          0, s.num_decode);
    case V3MutationKind::prefill_q_len_not_chunk:
      return s.num_prefill > 0 && (*s.params.chunk_prefill_size >= 2 ||
                                   pick(
                                       s,
                                       [](const V3CaseSpec& c, int64_t i) {
                                         return c.seqs[static_cast<size_t>(i)].kv_len >= 2;
                                       },
                                       s.num_decode, s.num_decode + s.num_prefill));
    default:
      return true;
  }
}

void apply_v3_mutation(const V3Mutation& m, const V3CaseSpec& spec, V3Materialized& case_,
                       std::vector<V3Declared>& declared) {
  Mutator(m, spec, case_, declared).run(m.kind);
}

bool v3_mutations_compose(const V3CaseSpec& spec, std::span<const V3Mutation> mutations) {
  std::vector<V3MutationGroup> seen;
  for (size_t i = 0; i < mutations.size(); ++i) {
    const V3MutationKind k = mutations[i].kind;
    if (!v3_mutation_applies(k, spec)) return false;
    const V3MutationGroup g = v3_mutation_group(k);
    if (g == V3MutationGroup::kShape && i > 0) return false;
    if (std::find(seen.begin(), seen.end(), g) != seen.end()) return false;
    // hd64's kv_len_overflows_int32 sets num_kv_pages_per_block, which kHd64Kv owns.
    if (g == V3MutationGroup::kHd64Kv && !seen.empty() &&
        mutations[0].kind == V3MutationKind::kv_len_overflows_int32)
      return false;
    seen.push_back(g);
  }
  return true;
}

}  // namespace rpa::props
