#include "casegen/jax_mutation.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/float32_scalar.h"
#include "core/python_repr.h"
#include "casegen/jax_case_spec.h"
#include "validation/jax_heads_per_block.h"
#include "validation/jax_vmem_budget.h"
#include "validation/target_profile.h"

namespace rpa::props {
namespace {

struct KindInfo {
  MutationKind kind;
  std::string_view name;
  RuleId rule;
  MutationGroup group;
};

constexpr KindInfo kKinds[] = {
#define RPA_MUTATION_INFO(name, rule, group) \
  {MutationKind::name, #name, RuleId::rule, MutationGroup::group},
    RPA_MUTATIONS(RPA_MUTATION_INFO)
#undef RPA_MUTATION_INFO
};

constexpr std::array<MutationKind, std::size(kKinds)> kAllKinds = [] {
  std::array<MutationKind, std::size(kKinds)> a{};
  for (size_t i = 0; i < a.size(); ++i) a[i] = kKinds[i].kind;
  return a;
}();

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Scalars that are not finite as a float32 (1e39 overflows it).
constexpr double kNonFinite[] = {kNaN, kInf, -kInf, 1e39};

std::string S(int64_t v) { return std::to_string(v); }
std::string F(double v) { return py_float_repr(v); }

// A zero tensor: validation reads no float data, and mutated index arrays are rebuilt.
Tensor zeros(DType t, Shape shape) { return Tensor(t, std::move(shape)); }

// The same values under another dtype (float16, which Tensor cannot write, stays zero, and
// so does float data under an integer or bool dtype: validation reads no float data).
Tensor convert(const Tensor& from, DType to) {
  Tensor t(to, from.shape());
  if (to == DType::kFloat16 || (!dtype_is_float(to) && dtype_is_float(from.dtype()))) return t;
  for (int64_t i = 0; i < from.numel(); ++i) {
    if (dtype_is_float(to)) {
      t.set_float(
          i, dtype_is_float(from.dtype()) ? from.float_at(i) : static_cast<double>(from.int_at(i)));
    } else {
      t.set_int(i, from.int_at(i));
    }
  }
  return t;
}

// What one mutation sees and declares.
class Mutator {
 public:
  Mutator(const MutationSpec& m, const CaseSpec& s, Inputs& in, Params& p,
          std::vector<Declared>& out)
      : s_(s), in_(in), p_(p), arg_(m.arg), out_(out) {}

  void run(MutationKind k);

 private:
  // Variant v of n: arg % n; magnitudes use arg / n.
  int64_t variant(int64_t n) const { return arg_ % n; }
  int64_t rest(int64_t n) const { return arg_ / n; }
  void both(RuleId r, std::string message) {
    strict(r, message);
    jax(r, std::move(message));
  }
  void strict(RuleId r, std::string message) {
    out_.push_back({Mode::kStrict, {r, std::move(message)}});
  }
  void jax(RuleId r, std::string message) { out_.push_back({Mode::kJax, {r, std::move(message)}}); }

  int64_t ns() const { return s_.num_seqs(); }
  int64_t N() const { return s_.max_num_seqs; }
  int64_t pps() const { return s_.pages_per_seq; }
  int64_t T() const { return s_.max_num_batched_tokens; }
  int64_t P() const { return s_.num_pages; }
  int64_t Sz() const { return s_.page_size; }
  int64_t Hq() const { return s_.num_q_heads(); }
  int64_t Hc() const { return 2 * s_.num_kv_heads; }
  int64_t D() const { return s_.head_dim; }
  int64_t cu(int64_t i) const { return in_.cu_q_lens.int_at(i); }
  int64_t kv(int64_t i) const { return s_.seqs[static_cast<size_t>(i)].kv_len; }
  int64_t q(int64_t i) const { return s_.seqs[static_cast<size_t>(i)].q_len; }

  std::string total_tokens_message(int64_t total, int64_t T) const {
    return "Total q tokens " + S(total) +
           " must be less or equal to max_num_batched_tokens=" + S(T) + ".";
  }
  std::string q_len_message(int64_t q_len, int64_t kv_len, int64_t i) const {
    return "q_len=" + S(q_len) + " must be less or equal to kv_len=" + S(kv_len) + " at sequence " +
           S(i) + ".";
  }
  std::string packing_zero_message(DType t) const {
    return "get_dtype_packing(" + dtype_repr(t) +
           ") is 0: can_be_xla_fully_tiled raises ZeroDivisionError.";
  }
  void nonfinite(RuleId r, const char* name, std::optional<double>& field) {
    field = kNonFinite[variant(4)];
    strict(r, std::string(name) + "=" + F(*field) + " must be finite as a float32.");
  }

  // Shape rules.
  void q_rank() {
    const Shape shape = variant(2) == 0 ? Shape{T(), Hq() * D()} : Shape{T(), Hq(), D(), 1};
    in_.q = zeros(s_.q_dtype, shape);
    both(RuleId::q_rank, "q.shape=" + shape_repr(shape) +
                             " must have rank 3: [max_num_batched_tokens, num_q_heads, head_dim].");
  }
  void kv_pages_rank() {
    const Shape shape =
        variant(2) == 0 ? Shape{P() * Sz(), Hc(), D()} : Shape{P(), Sz(), Hc(), D(), 1};
    in_.kv_pages = zeros(s_.kv_dtype, shape);
    both(RuleId::kv_pages_rank,
         "kv_pages.shape=" + shape_repr(shape) +
             " must have rank 4: [total_num_pages, page_size, num_combined_kv_heads, head_dim].");
  }
  void combined_heads_odd() {
    const int64_t hc = variant(2) == 0 ? Hc() + 1 : Hc() - 1;
    in_.kv_pages = zeros(s_.kv_dtype, {P(), Sz(), hc, D()});
    both(RuleId::combined_heads_odd, "num_combined_kv_heads=" + S(hc) + " must be even.");
  }
  void page_indices_rank() {
    const Shape shape = variant(2) == 0 ? Shape{N() * pps()} : Shape{N(), pps(), 1};
    in_.page_indices = zeros(DType::kInt32, shape);
    both(RuleId::page_indices_rank, "page_indices.shape=" + shape_repr(shape) +
                                        " must have rank 2: [max_num_seqs, pages_per_seq].");
  }
  void num_seqs_shape() {
    const Shape shapes[] = {{2}, {}, {1, 1}};
    const Shape& shape = shapes[variant(3)];
    in_.num_seqs = zeros(DType::kInt32, shape);
    both(RuleId::num_seqs_shape, "num_seqs.shape=" + shape_repr(shape) + " must be (1,)");
  }
  void head_dim_mismatch() {
    const int64_t dk = D() + 1 + variant(3);
    in_.kv_pages = zeros(s_.kv_dtype, {P(), Sz(), Hc(), dk});
    both(RuleId::head_dim_mismatch,
         "Q head_dim " + S(D()) + " must be the same as that of K/V " + S(dk) + ".");
  }
  void kv_lens_shape() {
    const int64_t m = variant(2) == 0 ? N() + 1 : (N() >= 2 ? N() - 1 : N() + 2);
    in_.kv_lens = zeros(DType::kInt32, {m});
    both(RuleId::kv_lens_shape, "Expected kv_lens.shape=(" + S(m) + ",) to be (" + S(N()) +
                                    ",) where `max_num_seqs` is `page_indices.shape[0]`.");
  }
  void cu_q_lens_shape() {
    const int64_t m = variant(2) == 0 ? N() : N() + 2;
    in_.cu_q_lens = zeros(DType::kInt32, {m});
    both(RuleId::cu_q_lens_shape, "Expected cu_q_lens.shape=(" + S(m) + ",) to be (" + S(N() + 1) +
                                      ",)  where `max_num_seqs` is `page_indices.shape[0]`.");
  }
  void index_dtype() {
    const DType dtypes[] = {DType::kInt64, DType::kInt16, DType::kFloat32, DType::kUInt32};
    Tensor* arrays[] = {&in_.kv_lens, &in_.page_indices, &in_.cu_q_lens};
    Tensor& t = *arrays[variant(3)];
    t = convert(t, dtypes[rest(3) % 4]);
    both(RuleId::index_dtype,
         "The dtype of `kv_lens`, `page_indices`, and `cu_q_lens` must be int32. Got "
         "kv_lens.dtype=" +
             dtype_repr(in_.kv_lens.dtype()) +
             ", page_indices.dtype=" + dtype_repr(in_.page_indices.dtype()) +
             ", cu_q_lens.dtype=" + dtype_repr(in_.cu_q_lens.dtype()) + ".");
  }
  void num_seqs_dtype() {
    const DType dtypes[] = {DType::kInt64, DType::kFloat32, DType::kInt16};
    const DType t = dtypes[variant(3)];
    in_.num_seqs = convert(in_.num_seqs, t);
    const std::string message = "num_seqs.dtype=" + dtype_repr(t) + " must be int32.";
    strict(RuleId::num_seqs_dtype, message);
    // JAX indexes cu_q_lens with num_seqs[0]: any integer works, a float raises.
    if (dtype_is_float(t)) jax(RuleId::num_seqs_dtype, message);
  }
  void q_dtype_unsupported() {
    const DType t = variant(2) == 0 ? DType::kFloat16 : DType::kFloat64;
    in_.q = convert(in_.q, t);
    strict(RuleId::q_dtype_unsupported,
           "q.dtype=" + dtype_repr(t) + " must be float32 or bfloat16.");
    // jax mode: JAX's get_min_heads_per_blk divides by the packing of a 64-bit dtype at the
    // kernel entry; any other dtype passes JAX and fails the Pallas kernel's assertion.
    if (dtype_bits(t) == 64) jax(RuleId::dtype_packing_zero, packing_zero_message(t));
    jax(RuleId::q_dtype_unsupported, "q.dtype=" + dtype_repr(t) +
                                         " must be float32 or bfloat16 for the Pallas kernel "
                                         "(fold_on_2nd_minor asserts it).");
  }
  void kv_dtype_unsupported() {
    const DType dtypes[] = {DType::kFloat16, DType::kFloat64, DType::kBool};
    const DType t = dtypes[variant(3)];
    in_.kv_pages = convert(in_.kv_pages, t);
    strict(RuleId::kv_dtype_unsupported,
           "kv_pages.dtype=" + dtype_repr(t) +
               " must be float32, bfloat16, float8_e4m3fn or float8_e5m2.");
    // jax mode: the Pallas kernel loads float16 (which packs 2 per word, and every generated
    // head count tiles at packing 2); a 64-bit dtype has packing 0 at the kernel entry; bool
    // packs 4 per word, where MQA's two combined heads do not tile, and fails the kernel's
    // bitcast after it.
    if (dtype_bits(t) == 64) jax(RuleId::dtype_packing_zero, packing_zero_message(t));
    if (t == DType::kBool) {
      if (!can_be_xla_fully_tiled(Hc(), dtype_packing(t))) {
        jax(RuleId::heads_not_tileable,
            "Not implemented: num_combined_kv_heads=" + S(Hc()) + " can not be XLA fully tiled.");
      }
      jax(RuleId::kv_dtype_unsupported,
          "kv_pages.dtype=dtype('bool') cannot be loaded by the Pallas kernel (its strided KV "
          "load bitcasts it, which lax.bitcast_convert_type refuses).");
    }
  }
  void dtype_mismatch() {
    const DType t = s_.q_dtype == DType::kFloat32 ? DType::kBFloat16 : DType::kFloat32;
    in_.q = convert(in_.q, t);
    strict(RuleId::dtype_mismatch, "q.dtype=" + dtype_repr(t) +
                                       " and kv_pages.dtype=" + dtype_repr(s_.kv_dtype) +
                                       " must be equal unless kv_pages is float8.");
  }
  void kv_heads_zero() {
    in_.kv_pages = zeros(s_.kv_dtype, {P(), Sz(), 0, D()});
    both(RuleId::kv_heads_zero, "num_kv_heads=0 must be positive.");
  }
  void heads_not_divisible() {
    const int64_t hkv = s_.num_kv_heads;
    const int64_t hq = Hq() + 1 + variant(hkv - 1);
    in_.q = zeros(s_.q_dtype, {T(), hq, D()});
    both(RuleId::heads_not_divisible,
         "num_q_heads=" + S(hq) + " must be divisible by num_kv_heads=" + S(hkv));
  }
  void q_heads_zero() {
    in_.q = zeros(s_.q_dtype, {T(), 0, D()});
    strict(RuleId::q_heads_zero, "num_q_heads=0 must be positive.");
    // JAX's validators accept it; the Pallas kernel divides by its heads per block.
    jax(RuleId::q_heads_zero,
        "num_q_heads=0 must be positive (the Pallas kernel divides by its heads per block).");
  }
  // jax mode: JAX's validators accept head_dim 0; the spec model's lane check (every
  // head_dim that is not a positive multiple of 128) reports the Pallas kernel's assertion.
  void head_dim_zero() {
    in_.q = zeros(s_.q_dtype, {T(), Hq(), 0});
    in_.kv_pages = zeros(s_.kv_dtype, {P(), Sz(), Hc(), 0});
    strict(RuleId::head_dim_zero, "head_dim=0 must be positive.");
  }

  // Parameter rules.
  void sliding_window_nonpositive() {
    p_.sliding_window = -variant(3);
    both(RuleId::sliding_window_nonpositive,
         "sliding_window=" + S(*p_.sliding_window) + " must be positive.");
  }
  void sliding_window_too_large() {
    p_.sliding_window = int64_t{1} << 31 | arg_;
    // jax mode: JAX's validators accept it; the Pallas kernel raises when tracing it.
    both(RuleId::sliding_window_too_large,
         "sliding_window=" + S(*p_.sliding_window) + " must fit in int32.");
  }
  void soft_cap_zero() {
    // 1e-50 is 0 as a float32, -1e-40 subnormal there (float32_scalar flushes both).
    const double caps[] = {0.0, -0.0, 1e-50, -1e-40};
    const double c = caps[variant(4)];
    p_.soft_cap = c;
    if (c == 0.0) {
      both(RuleId::soft_cap_zero, "soft_cap=" + F(c) + " must not be 0.0.");
    } else {
      // Nonzero as a double, so JAX divides by it; 0 as the kernel's float32.
      strict(RuleId::soft_cap_zero, soft_cap_flushed_message(c));
    }
  }
  void mask_value_too_large() {
    const double masks[] = {0.0, -1.0, 1.0, -1e29, 3e38};
    p_.mask_value = masks[variant(5)];
    strict(RuleId::mask_value_too_large,
           "mask_value=" + F(*p_.mask_value) + " must be at most -1e+30.");
  }
  void kv_pages_per_block_bad() {
    if (!p_.num_queries_per_block) p_.num_queries_per_block = 1;
    switch (variant(4)) {
      case 0:
      case 1: {
        const int64_t b = variant(4) == 0 ? 0 : -1 - rest(4) % 100;
        p_.num_kv_pages_per_block = b;
        strict(RuleId::kv_pages_per_block_nonpositive,
               "num_kv_pages_per_block=" + S(b) + " must be positive.");
        return;
      }
      case 2:  // the kernel clamps page slots: strict-valid unless the VMEM budget breaks
        p_.num_kv_pages_per_block = pps() + 1;
        return;
      default: {
        const int64_t b = (int64_t{1} << 40) + rest(4);
        p_.num_kv_pages_per_block = b;
        // The block loop's kv_blk_idx * bkv * S overflows int32 for the first sequence. JAX
        // rejects the block as larger than pages_per_seq (the spec model's range check), so
        // jax mode never reaches the Pallas kernel's KV loop (kv_block_loop_wraps_int32
        // mutation).
        const bool readable = in_.num_seqs.dtype() == DType::kInt32 &&
                              in_.num_seqs.shape() == Shape{1} &&
                              in_.kv_lens.dtype() == DType::kInt32 && in_.kv_lens.numel() >= 1 &&
                              in_.kv_pages.rank() == 4;
        const int64_t n = readable ? in_.num_seqs.int_at(0) : 0;
        if (n >= 1 && n <= N() && in_.kv_pages.dim(1) > 0) {
          const int64_t kv0 = in_.kv_lens.int_at(0);
          strict(RuleId::kv_len_overflows_int32,
                 "kv_len=" + S(kv0) + " at sequence 0 with page_size=" + S(in_.kv_pages.dim(1)) +
                     " and num_kv_pages_per_block=" + S(b) +
                     " overflows the kernel's int32 block arithmetic.");
        }
      }
    }
  }
  void queries_per_block_nonpositive() {
    if (!p_.num_kv_pages_per_block) p_.num_kv_pages_per_block = 1;
    p_.num_queries_per_block = -variant(3);
    both(RuleId::queries_per_block_nonpositive,
         "num_queries_per_block=" + S(*p_.num_queries_per_block) + " must be positive.");
  }
  // Both block sizes given (JAX discards one alone), the query block past int32: the Pallas
  // kernel multiplies the block index by it in int32. Strict mode: the spec model's VMEM
  // budget (its q and o blocks alone outgrow every TPU).
  void queries_per_block_too_large() {
    if (!p_.num_kv_pages_per_block) p_.num_kv_pages_per_block = 1;
    const int64_t sizes[] = {int64_t{1} << 31, (int64_t{1} << 31) + 1 + rest(4) % 1000,
                             int64_t{1} << 32, int64_t{1} << 40};
    p_.num_queries_per_block = sizes[variant(4)];
    jax(RuleId::queries_per_block_too_large,
        "num_queries_per_block=" + S(*p_.num_queries_per_block) + " must fit in int32.");
  }
  void block_sizes_partial() {
    const bool drop_kv = variant(2) == 1;
    if (p_.num_kv_pages_per_block) {
      (drop_kv ? p_.num_kv_pages_per_block : p_.num_queries_per_block).reset();
    } else {
      (drop_kv ? p_.num_queries_per_block : p_.num_kv_pages_per_block) = 1;
    }
    auto text = [](const std::optional<int64_t>& v) { return v ? S(*v) : std::string("None"); };
    strict(RuleId::block_sizes_partial,
           "num_kv_pages_per_block=" + text(p_.num_kv_pages_per_block) +
               " and num_queries_per_block=" + text(p_.num_queries_per_block) +
               " must be given together.");
  }
  void vmem_limit_nonpositive() {
    const int64_t limits[] = {0, -1, -(int64_t{1} << 40)};
    p_.vmem_limit_bytes = limits[variant(3)];
    both(RuleId::vmem_limit_nonpositive,
         "vmem_limit_bytes=" + S(*p_.vmem_limit_bytes) + " must be positive.");
  }
  void vmem_limit_over_capacity() {
    const TargetProfile& t = default_target_profile();
    p_.vmem_limit_bytes = t.vmem_capacity_bytes + 1 + arg_;
    strict(RuleId::vmem_limit_over_capacity,
           "vmem_limit_bytes=" + S(*p_.vmem_limit_bytes) + " must not exceed the " +
               std::string(t.name) + " VMEM capacity of " + S(t.vmem_capacity_bytes) + " bytes.");
  }
  // The limit goes below what the blocks need; the spec model's budget check declares it.
  void vmem_budget_exceeded() {
    const VmemShape shape{.page_size = Sz(),
                          .head_dim = D(),
                          .q_heads_per_kv = s_.q_per_kv,
                          .heads = *min_heads_per_block(Hq(), Hc(), s_.q_dtype, s_.kv_dtype),
                          .q_dtype = s_.q_dtype,
                          .kv_dtype = s_.kv_dtype};
    const bool given = p_.num_kv_pages_per_block && p_.num_queries_per_block;
    const int64_t need = vmem_need_bytes(
        shape, given ? BlockSizes{*p_.num_kv_pages_per_block, *p_.num_queries_per_block}
                     : BlockSizes{1, 1});
    p_.vmem_limit_bytes = 1 + arg_ % (need - 1);
  }

  // Sequence rules.
  void num_seqs_too_large() {
    const int64_t n = N() + 1 + variant(4);
    in_.num_seqs.set_int(0, n);
    both(RuleId::num_seqs_too_large,
         "num_seqs[0]=" + S(n) + " must be less or equal to max_num_seqs=" + S(N()));
  }
  void max_num_seqs_zero() {
    in_.kv_lens = zeros(DType::kInt32, {0});
    in_.page_indices = zeros(DType::kInt32, {0, pps()});
    in_.cu_q_lens = zeros(DType::kInt32, {1});
    in_.num_seqs.set_int(0, 0);
    both(RuleId::max_num_seqs_zero, "max_num_seqs=0 must be positive.");
  }
  // Variant 1 also empties every slot (kv_len 0, q_len 0) and gives no block sizes (none is
  // in JAX's range (0, 0]), so that JAX's own checks pass. jax mode: the Pallas kernel DMAs
  // page_indices[0, 0] for the first KV block of any grid (T > 0), after JAX's
  // pages_per_seq and block-range checks, which the spec model ranks first.
  void pages_per_seq_zero() {
    in_.page_indices = zeros(DType::kInt32, {N(), 0});
    if (variant(2) == 1) {
      for (int64_t i = 0; i < N(); ++i) in_.kv_lens.set_int(i, 0);
      for (int64_t i = 0; i <= N(); ++i) in_.cu_q_lens.set_int(i, 0);
      p_.num_kv_pages_per_block.reset();
      p_.num_queries_per_block.reset();
    }
    strict(RuleId::pages_per_seq_zero, "pages_per_seq=0 must be positive.");
    if (T() > 0) {
      jax(RuleId::pages_per_seq_zero,
          "pages_per_seq=0 must be positive (the Pallas kernel DMAs page_indices[0, 0] for its "
          "first KV block).");
    }
  }
  void page_size_zero() {
    in_.kv_pages = zeros(s_.kv_dtype, {P(), 0, Hc(), D()});
    both(RuleId::page_size_zero, "page_size=0 must be positive.");
  }
  void pages_per_seq_too_small() {
    const int64_t i = variant(ns());
    const int64_t kv_len = pps() * Sz() + 1 + rest(ns()) % Sz();
    in_.kv_lens.set_int(i, kv_len);
    // JAX takes the max over every slot, padding included: the spec model's own check.
    strict(RuleId::pages_per_seq_too_small,
           "pages_per_seq=" + S(pps()) + " must be greater or equal to min_pages_per_seq=" +
               S(pps() + 1) + " given max_kv_len=" + S(kv_len) + " and page_size=" + S(Sz()) + ".");
  }
  void num_seqs_negative() {
    const int64_t k = 1 + variant(N() + 2);
    in_.num_seqs.set_int(0, -k);
    const std::string message = "num_seqs[0]=" + S(-k) + " must be non-negative.";
    strict(RuleId::num_seqs_negative, message);
    // JAX reads cu_q_lens[-k] (from the end, clamped at 0) as the token total.
    const int64_t total = cu(std::max<int64_t>(N() + 1 - k, 0));
    if (total > T()) jax(RuleId::total_q_tokens_too_large, total_tokens_message(total, T()));
    jax(RuleId::num_seqs_negative, message);
  }
  void cu_q_lens_first_nonzero() {
    const int64_t c = 1 + variant(4);
    for (int64_t i = 0; i <= ns(); ++i) in_.cu_q_lens.set_int(i, cu(i) + c);
    strict(RuleId::cu_q_lens_first_nonzero, "cu_q_lens[0]=" + S(c) + " must be 0.");
    if (cu(ns()) > T()) jax(RuleId::total_q_tokens_too_large, total_tokens_message(cu(ns()), T()));
  }
  void cu_q_lens_decreasing() {
    const int64_t i = variant(ns());
    const int64_t k = 1 + rest(ns()) % 3;
    in_.cu_q_lens.set_int(i + 1, cu(i) - k);
    strict(RuleId::cu_q_lens_decreasing, "cu_q_lens[" + S(i + 1) + "]=" + S(cu(i + 1)) +
                                             " must be greater or equal to cu_q_lens[" + S(i) +
                                             "]=" + S(cu(i)) + " (q_len=" + S(-k) +
                                             " at sequence " + S(i) + ").");
    // JAX only sees q_len: -k passes, and the next sequence gains k + q_len(i) rows.
    if (i + 1 < ns()) {
      const int64_t next_q = cu(i + 2) - cu(i + 1);
      if (next_q > kv(i + 1)) {
        jax(RuleId::q_len_exceeds_kv_len, q_len_message(next_q, kv(i + 1), i + 1));
      }
    }
  }
  void kv_len_negative() {
    const int64_t i = variant(ns());
    const int64_t kv_len = -1 - rest(ns()) % 3;
    in_.kv_lens.set_int(i, kv_len);
    strict(RuleId::kv_len_negative,
           "kv_len=" + S(kv_len) + " must be non-negative at sequence " + S(i) + ".");
    jax(RuleId::q_len_exceeds_kv_len, q_len_message(q(i), kv_len, i));
  }
  void total_q_tokens_too_large() {
    const int64_t total = s_.total_q_len();
    const int64_t t = total - 1 - variant(total);
    in_.q = zeros(s_.q_dtype, {t, Hq(), D()});
    both(RuleId::total_q_tokens_too_large, total_tokens_message(total, t));
  }
  void q_len_exceeds_kv_len() {
    std::vector<int64_t> with_rows;
    for (int64_t i = 0; i < ns(); ++i) {
      if (q(i) >= 1) with_rows.push_back(i);
    }
    const int64_t i =
        with_rows[static_cast<size_t>(variant(static_cast<int64_t>(with_rows.size())))];
    const int64_t kv_len = q(i) - 1 - rest(static_cast<int64_t>(with_rows.size())) % q(i);
    in_.kv_lens.set_int(i, kv_len);
    both(RuleId::q_len_exceeds_kv_len, q_len_message(q(i), kv_len, i));
  }
  // jax mode: TPU interpret mode raises where the Pallas kernel DMAs an index outside
  // [-P, P), which depends on the prefetch chain (a kv_len-0 sequence's first page is not
  // always fetched): the spec model's walk of the program declares it.
  void page_index_out_of_range() {
    const int64_t rows = std::max<int64_t>(ns(), 1);
    const int64_t i = variant(rows);
    const int64_t read = i < ns() ? pages_for(kv(i), Sz()) : 0;
    const int64_t cols = std::max<int64_t>(read, 1);
    const int64_t j = rest(rows) % cols;
    const int64_t values[] = {P(), -1, P() + 1000, std::numeric_limits<int32_t>::min()};
    const int64_t v = values[rest(rows * cols) % 4];
    in_.page_indices.set_int(i * pps() + j, v);
    const std::string why = read > 0 ? "sequence " + S(i) + " reads " + S(read) + " pages"
                                     : "the kernel prefetches the first page of sequence slot " +
                                           S(i) + " even with nothing to read";
    strict(RuleId::page_index_out_of_range, "page_indices[" + S(i) + ", " + S(j) + "]=" + S(v) +
                                                " must be in range [0, " + S(P()) + ") (" + why +
                                                ").");
  }
  void heads_not_tileable() {
    int64_t hc = 2;
    if (s_.num_kv_heads == 1) {
      // MQA with float8 KV: two combined heads in a four-per-word tile.
      in_.kv_pages = convert(in_.kv_pages, DType::kFloat8E4M3FN);
    } else {
      hc = 6;  // three kv heads tile in no dtype
      in_.kv_pages = zeros(s_.kv_dtype, {P(), Sz(), hc, D()});
      in_.q = zeros(s_.q_dtype, {T(), 3 * s_.q_per_kv, D()});
    }
    both(RuleId::heads_not_tileable,
         "Not implemented: num_combined_kv_heads=" + S(hc) + " can not be XLA fully tiled.");
  }
  void smem_budget_exceeded() {
    const TargetProfile& t = default_target_profile();
    const int64_t wide = t.smem_capacity_bytes / 4 / N() + 1 + variant(8);
    std::vector<int32_t> pages(static_cast<size_t>(N() * wide), -1);
    for (int64_t i = 0; i < N(); ++i) {
      for (int64_t j = 0; j < pps(); ++j) {
        pages[static_cast<size_t>(i * wide + j)] =
            static_cast<int32_t>(in_.page_indices.int_at(i * pps() + j));
      }
    }
    in_.page_indices = Tensor::from_int32({N(), wide}, pages);
    strict(RuleId::smem_budget_exceeded,
           "the prefetched index arrays need " + S(smem_need_bytes(N(), wide)) +
               " bytes of SMEM, more than the " + std::string(t.name) + " capacity of " +
               S(t.smem_capacity_bytes) + " bytes.");
  }

  // A used sequence's kv_len becomes INT32_MAX on pages of at least two tokens: JAX's
  // pages_per_seq check computes cdiv in int32, which wraps negative and passes, and the
  // Pallas kernel's KV loop (kv_blk * bkv * S < kv_len in int32) wraps before it ends, as
  // INT32_MAX, a prime, is a multiple of no block. Pages of one token are widened to two
  // (validation reads no data). jax mode: the spec model's KV loop check, which takes the
  // block sizes the kernel runs with after every parameter mutation.
  void kv_block_loop_wraps_int32() {
    const int64_t page = std::max<int64_t>(Sz(), 2);
    if (page != Sz()) in_.kv_pages = zeros(s_.kv_dtype, {P(), page, Hc(), D()});
    const int64_t i = variant(ns());
    in_.kv_lens.set_int(i, kInt32Max);
    strict(RuleId::pages_per_seq_too_small,
           "pages_per_seq=" + S(pps()) + " must be greater or equal to min_pages_per_seq=" +
               S((kInt32Max + page - 1) / page) + " given max_kv_len=" + S(kInt32Max) +
               " and page_size=" + S(page) + ".");
  }
  // The sequence before one with rows gets no keys (kv_len 0, q_len 0) and a first page of
  // its own (a second page is added if the pool has only one): the kernel prefetches that page
  // for it, runs no step for it, and the next sequence's first step computes over it
  // (finding 8). Declared by the spec model's walk of the program, as for every generated
  // case (the base case may hold such a sequence already, and pages may still coincide
  // through an earlier empty sequence); jax mode accepts (the kernel runs).
  void stale_kv_block() {
    std::vector<int64_t> with_rows;
    for (int64_t j = 1; j < ns(); ++j) {
      if (q(j) >= 1) with_rows.push_back(j);
    }
    const auto n = static_cast<int64_t>(with_rows.size());
    const int64_t j = with_rows[static_cast<size_t>(variant(n))];
    const int64_t i = j - 1;
    const int64_t removed = q(i);
    for (int64_t k = i + 1; k <= ns(); ++k) in_.cu_q_lens.set_int(k, cu(k) - removed);
    in_.kv_lens.set_int(i, 0);
    const int64_t pages = std::max<int64_t>(P(), 2);
    if (pages != P()) in_.kv_pages = zeros(s_.kv_dtype, {pages, Sz(), Hc(), D()});
    const int64_t theirs = in_.page_indices.int_at(j * pps());
    in_.page_indices.set_int(i * pps(), (theirs + 1 + rest(n) % (pages - 1)) % pages);
  }
  // Two heads blocks (eight float32 kv heads, one query head each: JAX's heads block is one
  // 8-row tile of 16 combined heads), the last sequence emptied (q_len 0) after one with
  // rows, and query blocks of one row (variant 0) or of every row, so that one ends exactly
  // at cu_q_lens[num_seqs]: heads block 1 starts at the empty sequence and never computes
  // the rows before it (finding 9). Both block sizes are set here (shape mutations apply
  // first, so a block mutation still overrides them). Declared by the spec model's walk of
  // the program (the base case may fail earlier, e.g. stale_kv_block, or outgrow its VMEM
  // limit with the wider heads); jax mode accepts.
  void rows_not_computed() {
    in_.q = zeros(DType::kFloat32, {T(), 8, D()});
    in_.kv_pages = zeros(DType::kFloat32, {P(), Sz(), 16, D()});
    in_.cu_q_lens.set_int(ns(), cu(ns() - 1));
    p_.num_kv_pages_per_block = 1;
    p_.num_queries_per_block = variant(2) == 0 ? 1 : cu(ns());
  }

  // q without rows (and every q_len 0): strict-valid. jax mode: the Pallas kernel reads a
  // query block of q all the same; the spec model's check, whose message depends on
  // whether both block sizes are given after every parameter mutation.
  void max_num_batched_tokens_zero() {
    in_.q = zeros(s_.q_dtype, {0, Hq(), D()});
    for (int64_t i = 0; i <= N(); ++i) in_.cu_q_lens.set_int(i, 0);
  }
  // One of k_scale and v_scale (variant 0: k_scale), under KV narrower than q: float8 KV
  // stays, KV of q's dtype gets q in the other float type (strict: dtype_mismatch). jax
  // mode: the spec model's check, on the scales every parameter mutation leaves.
  void kv_scales_one_sided() {
    if (s_.kv_dtype == s_.q_dtype) {
      const DType t = s_.q_dtype == DType::kFloat32 ? DType::kBFloat16 : DType::kFloat32;
      in_.q = convert(in_.q, t);
      strict(RuleId::dtype_mismatch, "q.dtype=" + dtype_repr(t) +
                                         " and kv_pages.dtype=" + dtype_repr(s_.kv_dtype) +
                                         " must be equal unless kv_pages is float8.");
    }
    const double scales[] = {0.5, 2.0, 1.0, -1.0};
    std::optional<double>& set = variant(2) == 0 ? p_.k_scale : p_.v_scale;
    std::optional<double>& unset = variant(2) == 0 ? p_.v_scale : p_.k_scale;
    set = scales[rest(2) % 4];
    unset.reset();
  }

  const CaseSpec& s_;
  Inputs& in_;
  Params& p_;
  int64_t arg_;
  std::vector<Declared>& out_;
};

void Mutator::run(MutationKind k) {
  switch (k) {
    case MutationKind::soft_cap_nonfinite:
      return nonfinite(RuleId::soft_cap_nonfinite, "soft_cap", p_.soft_cap);
    case MutationKind::mask_value_nonfinite:
      return nonfinite(RuleId::mask_value_nonfinite, "mask_value", p_.mask_value);
    case MutationKind::k_scale_nonfinite:
      return nonfinite(RuleId::k_scale_nonfinite, "k_scale", p_.k_scale);
    case MutationKind::v_scale_nonfinite:
      return nonfinite(RuleId::v_scale_nonfinite, "v_scale", p_.v_scale);
    case MutationKind::sm_scale_nonfinite: {
      std::optional<double> v;
      nonfinite(RuleId::sm_scale_nonfinite, "sm_scale", v);
      p_.sm_scale = *v;
      return;
    }
    case MutationKind::q_rank:
      return q_rank();
    case MutationKind::kv_pages_rank:
      return kv_pages_rank();
    case MutationKind::combined_heads_odd:
      return combined_heads_odd();
    case MutationKind::page_indices_rank:
      return page_indices_rank();
    case MutationKind::num_seqs_shape:
      return num_seqs_shape();
    case MutationKind::head_dim_mismatch:
      return head_dim_mismatch();
    case MutationKind::kv_lens_shape:
      return kv_lens_shape();
    case MutationKind::cu_q_lens_shape:
      return cu_q_lens_shape();
    case MutationKind::index_dtype:
      return index_dtype();
    case MutationKind::num_seqs_dtype:
      return num_seqs_dtype();
    case MutationKind::q_dtype_unsupported:
      return q_dtype_unsupported();
    case MutationKind::kv_dtype_unsupported:
      return kv_dtype_unsupported();
    case MutationKind::dtype_mismatch:
      return dtype_mismatch();
    case MutationKind::kv_heads_zero:
      return kv_heads_zero();
    case MutationKind::heads_not_divisible:
      return heads_not_divisible();
    case MutationKind::q_heads_zero:
      return q_heads_zero();
    case MutationKind::head_dim_zero:
      return head_dim_zero();
    case MutationKind::sliding_window_nonpositive:
      return sliding_window_nonpositive();
    case MutationKind::sliding_window_too_large:
      return sliding_window_too_large();
    case MutationKind::soft_cap_zero:
      return soft_cap_zero();
    case MutationKind::mask_value_too_large:
      return mask_value_too_large();
    case MutationKind::kv_pages_per_block_bad:
      return kv_pages_per_block_bad();
    case MutationKind::queries_per_block_nonpositive:
      return queries_per_block_nonpositive();
    case MutationKind::queries_per_block_too_large:
      return queries_per_block_too_large();
    case MutationKind::block_sizes_partial:
      return block_sizes_partial();
    case MutationKind::vmem_limit_nonpositive:
      return vmem_limit_nonpositive();
    case MutationKind::vmem_limit_over_capacity:
      return vmem_limit_over_capacity();
    case MutationKind::vmem_budget_exceeded:
      return vmem_budget_exceeded();
    case MutationKind::num_seqs_too_large:
      return num_seqs_too_large();
    case MutationKind::max_num_seqs_zero:
      return max_num_seqs_zero();
    case MutationKind::pages_per_seq_zero:
      return pages_per_seq_zero();
    case MutationKind::page_size_zero:
      return page_size_zero();
    case MutationKind::pages_per_seq_too_small:
      return pages_per_seq_too_small();
    case MutationKind::num_seqs_negative:
      return num_seqs_negative();
    case MutationKind::cu_q_lens_first_nonzero:
      return cu_q_lens_first_nonzero();
    case MutationKind::cu_q_lens_decreasing:
      return cu_q_lens_decreasing();
    case MutationKind::kv_len_negative:
      return kv_len_negative();
    case MutationKind::total_q_tokens_too_large:
      return total_q_tokens_too_large();
    case MutationKind::q_len_exceeds_kv_len:
      return q_len_exceeds_kv_len();
    case MutationKind::page_index_out_of_range:
      return page_index_out_of_range();
    case MutationKind::heads_not_tileable:
      return heads_not_tileable();
    case MutationKind::smem_budget_exceeded:
      return smem_budget_exceeded();
    case MutationKind::kv_block_loop_wraps_int32:
      return kv_block_loop_wraps_int32();
    case MutationKind::stale_kv_block:
      return stale_kv_block();
    case MutationKind::rows_not_computed:
      return rows_not_computed();
    case MutationKind::max_num_batched_tokens_zero:
      return max_num_batched_tokens_zero();
    case MutationKind::kv_scales_one_sided:
      return kv_scales_one_sided();
  }
}

}  // namespace

std::span<const MutationKind> all_mutation_kinds() { return kAllKinds; }

std::string_view mutation_name(MutationKind k) { return kKinds[static_cast<size_t>(k)].name; }

MutationGroup mutation_group(MutationKind k) { return kKinds[static_cast<size_t>(k)].group; }

RuleId mutation_rule(MutationKind k) { return kKinds[static_cast<size_t>(k)].rule; }

bool mutation_applies(MutationKind k, const CaseSpec& s) {
  switch (k) {
    case MutationKind::heads_not_divisible:
      return s.num_kv_heads >= 2;
    case MutationKind::dtype_mismatch:
      return s.kv_dtype == DType::kFloat32 || s.kv_dtype == DType::kBFloat16;
    case MutationKind::pages_per_seq_too_small:
    case MutationKind::cu_q_lens_decreasing:
    case MutationKind::kv_len_negative:
    case MutationKind::kv_block_loop_wraps_int32:
      return s.num_seqs() >= 1;
    case MutationKind::stale_kv_block:  // a sequence with rows after the first
      return std::any_of(s.seqs.begin() + std::min<int64_t>(s.num_seqs(), 1), s.seqs.end(),
                         [](const SeqSpec& q) { return q.q_len >= 1; });
    case MutationKind::rows_not_computed:  // a sequence with rows before the last
      return std::any_of(s.seqs.begin(), s.seqs.end() - std::min<int64_t>(s.num_seqs(), 1),
                         [](const SeqSpec& q) { return q.q_len >= 1; });
    case MutationKind::total_q_tokens_too_large:
      return s.total_q_len() >= 1;
    case MutationKind::q_len_exceeds_kv_len:
      return std::any_of(s.seqs.begin(), s.seqs.end(),
                         [](const SeqSpec& q) { return q.q_len >= 1; });
    default:
      return true;
  }
}

void apply_mutation(const MutationSpec& m, const CaseSpec& spec, Inputs& in, Params& params,
                    std::vector<Declared>& declared) {
  Mutator(m, spec, in, params, declared).run(m.kind);
}

}  // namespace rpa::props
