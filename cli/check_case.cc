#include "cli/check_case.h"

#include <cmath>
#include <utility>

#include "cli/exit_codes.h"
#include "cli/number_text.h"
#include "kernel/python_repr.h"
#include "kernel/tiled_kernel.h"
#include "reference/dense_reference.h"

namespace rpa {
std::string_view verdict_name(CheckVerdict v) {
  switch (v) {
    case CheckVerdict::kAgree: return "agree";
    case CheckVerdict::kMismatch: return "mismatch";
    case CheckVerdict::kBiased: return "biased";
    case CheckVerdict::kRejected: return "rejected";
    case CheckVerdict::kUnreadable: return "unreadable";
    case CheckVerdict::kNotApplicable: return "not_applicable";
  }
  return "?";
}

int verdict_exit(CheckVerdict v) {
  switch (v) {
    case CheckVerdict::kAgree: return kExitOk;
    case CheckVerdict::kMismatch:
    case CheckVerdict::kBiased: return kExitMismatch;
    case CheckVerdict::kRejected: return kExitRejected;
    case CheckVerdict::kUnreadable: return kExitUnreadable;
    case CheckVerdict::kNotApplicable: return kExitUsage;
  }
  return kExitUsage;
}

CheckOutcome check_case(const Case& c, const CliArgs& a) {
  CheckOutcome o;
  o.has_out = c.out.has_value();
  const auto usage = [&o](std::string why) {
    o.verdict = CheckVerdict::kNotApplicable;
    o.detail = std::move(why);
    return o;
  };
  const bool literal_oracle = a.oracle == "literal";
  if (a.literal && c.out) {
    return usage("--schedule literal applies to the tiled kernel; the case holds its own `out`");
  }
  if (literal_oracle && !c.out) {
    return usage("--oracle literal needs a case with `out` (an output to check)");
  }
  o.rejection = literal_oracle && a.validate.mode == Mode::kJax ? literal_jax_rejection(c, a)
                                                                : compute_rejection(c, a);
  if (o.rejection) {
    o.verdict = CheckVerdict::kRejected;
    o.detail = o.rejection->why;
    return o;
  }
  // The output under test: the case's own `out`, else the tiled kernel's.
  const Tensor out = c.out ? *c.out : tiled_attention(c.inputs, c.params, kernel_options(a));
  o.checked = c.out ? "out" : a.literal ? "the tiled kernel (literal schedule)" : "the tiled kernel";
  if (out.shape() != c.inputs.q.shape() || out.dtype() != c.inputs.q.dtype()) {
    o.verdict = CheckVerdict::kUnreadable;
    o.detail = a.path + ": member 'out.npy' is " + std::string(dtype_name(out.dtype())) + " " +
               shape_repr(out.shape()) + ", expected q's " +
               std::string(dtype_name(c.inputs.q.dtype())) + " " + shape_repr(c.inputs.q.shape());
    return o;
  }
  // The oracle: the dense reference (the definition), or the literal schedule (what the
  // Pallas kernel computes, also where the definition does not hold).
  Tensor want;
  Tolerance tol;
  if (literal_oracle) {
    CliArgs literal = a;
    literal.literal = true;
    const KernelOptions options = kernel_options(literal);
    want = tiled_attention(c.inputs, c.params, options);
    tol = schedule_tolerance(
        c.inputs, c.params,
        plan_kernel(c.inputs, c.params, options.target, options.untuned_blocks));
  } else {
    ReferenceResult ref = dense_reference(c.inputs, c.params, a.reference_semantics(),
                                          most_logit_error(a.dot_passes));
    tol = tolerance_for_case(c.inputs, c.params, ref, a.dot_passes);
    want = std::move(ref.out);
  }
  o.oracle = literal_oracle ? "the literal schedule"
                            : "the reference (" + semantics_label(a.reference_semantics()) + ")";
  o.cmp = compare_outputs(out, want, PagedKvView(c.inputs), tol);
  // Against the reference semantics the bias is reported, not judged: that semantics rounds p
  // and p.V to V's dtype, which moves its outputs systematically away from what a kernel
  // computing in the kernel semantics gives (+0.9 ulp toward zero on tests/cli_semantics_test's
  // bfloat16 / float8_e4m3fn case at kv_len 1024).
  if (!literal_oracle && a.reference_semantics() == Semantics::kReference) {
    o.cmp->bias.judged = false;
  }
  o.verdict = !o.cmp->agree()                        ? CheckVerdict::kMismatch
              : o.cmp->bias.biased() && !a.allow_bias ? CheckVerdict::kBiased
                                                      : CheckVerdict::kAgree;
  return o;
}

CheckOutcome check_file(const CliArgs& a) {
  CaseReadResult read = read_case_file(a.path, a.read);
  if (!read.value) {
    CheckOutcome o;
    o.verdict = CheckVerdict::kUnreadable;
    o.detail = std::move(read.error);
    return o;
  }
  return check_case(*read.value, a);
}

namespace {

// "+0.012 ulp (SE 0.020), toward zero -0.003 ulp (SE 0.011)"
std::string bias_numbers(const BiasStats& b) {
  return signed_fixed(b.mean_signed(), 3) + " ulp (SE " + fixed(b.se_signed(), 3) +
         "), toward zero " + signed_fixed(-b.mean_magnitude(), 3) + " ulp (SE " +
         fixed(b.se_magnitude(), 3) + ")";
}

}  // namespace

std::string key_weight_phrase(const Comparison& c) {
  const double w = c.min_detectable_key_weight, all = c.key_weight_every_row;
  if (!(w < 1.0)) return "catches no dropped key";
  std::string s = "catches a dropped key of weight >= " + formatted(w, "%.2g");
  if (all > w) s += " (in every row: " + (all < 1.0 ? formatted(all, "%.2g") : std::string("none")) + ")";
  return s;
}

std::string comparison_summary(const Comparison& c) {
  return fixed(c.max_budget_used, 2) + " of tolerance; bias " + bias_numbers(c.bias) + "; " +
         fixed(100.0 * c.bias.exact_share(), 1) + "% exact of " + py_int_repr(c.bias.elements);
}

std::string bias_line(const Comparison& c) {
  return "mean error " + bias_numbers(c.bias) + " over " + py_int_repr(c.bias.elements) +
         " elements in " + py_int_repr(c.bias.units) + " (row, head) units: a mean beyond " +
         fixed(kBiasSigmas, 0) + " standard errors and " + fixed(kBiasMinUlps, 1) +
         " ulp is a systematic bias (oracle/bias.cc); --allow-bias accepts it";
}

}  // namespace rpa
