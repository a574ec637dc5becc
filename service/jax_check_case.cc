#include "service/jax_check_case.h"

#include <memory>
#include <utility>

#include "core/jax_kv_view.h"
#include "core/python_repr.h"
#include "kernel/jax_kernel.h"
#include "oracle/jax_tolerance.h"
#include "reference/jax_reference.h"
#include "service/number_text.h"

namespace rpa {
namespace {

using Found = CheckFound<Rejection, Comparison>;

CheckOutcome check_found(const Case& c, const CaseOptions& a, Found& found) {
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
  found.rejection = literal_oracle && a.validate.mode == Mode::kJax ? literal_jax_rejection(c, a)
                                                                : compute_rejection(c, a);
  if (found.rejection) {
    o.verdict = CheckVerdict::kRejected;
    o.detail = found.rejection->why;
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
    CaseOptions literal = a;
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
  found.comparison = compare_outputs(out, want, kv_view(c.inputs), tol);
  // Against the reference semantics the bias is reported, not judged: that semantics rounds p
  // and p.V to V's dtype, which moves its outputs systematically away from what a kernel
  // computing in the kernel semantics gives (+0.9 ulp toward zero on tests/cli_semantics_test's
  // bfloat16 / float8_e4m3fn case at kv_len 1024).
  if (!literal_oracle && a.reference_semantics() == Semantics::kReference) {
    found.comparison->bias.judged = false;
  }
  o.verdict = !found.comparison->agree()                         ? CheckVerdict::kMismatch
              : found.comparison->bias.biased() && !a.allow_bias ? CheckVerdict::kBiased
                                                                 : CheckVerdict::kAgree;
  return o;
}

}  // namespace

namespace {

std::string check_json_text(const Comparison& cmp, const CheckOutcome& o, const CaseOptions& a) {
  JsonWriter j;
  j.begin_object().key("valid").value(true).key("mode").value(mode_name(a.validate.mode));
  j.key("verdict").value(verdict_name(o.verdict));
  j.key("checked").value(o.has_out ? "out" : "kernel");
  j.key("oracle").value(a.oracle == "literal" ? "literal" : "reference");
  if (a.oracle != "literal") j.key("semantics").value(semantics_name(a.reference_semantics()));
  if (!o.has_out) j.key("schedule").value(a.literal ? "literal" : "default");
  if (a.oracle != "literal") j.key("dot_passes").value(dot_pass_count(a.dot_passes));
  write_comparison_json(j, cmp);
  j.key("seconds").value(o.seconds);
  return j.end_object().str();
}

std::string check_text_lines(const Comparison& cmp, const CheckOutcome& o, const CaseOptions& a) {
  std::string t = a.path + ": ";
  if (o.verdict == CheckVerdict::kMismatch) {
    t += "MISMATCH between " + o.checked + " and " + o.oracle + " at " + describe_mismatch(cmp) +
         "; discrimination " + py_float_repr(cmp.discrimination) + "\n";
  } else if (o.verdict == CheckVerdict::kBiased) {
    t += "BIASED: " + o.checked + " is within the tolerance of " + o.oracle + " (" +
         py_float_repr(cmp.max_budget_used) + " of it) but its " + bias_line(cmp) + "\n";
  } else {
    t += o.checked + " agrees with " + o.oracle + " (" + describe_mismatch(cmp) +
         "; max abs err " + py_float_repr(cmp.max_abs_err) + ", atol " +
         py_float_repr(cmp.tol.atol) + ", rtol " + py_float_repr(cmp.tol.rtol);
    if (cmp.tol.element_atol) {
      t += ", per-element terms up to " + py_float_repr(cmp.tol.max_element_atol());
    }
    t += "; discrimination " + py_float_repr(cmp.discrimination) + "; " + key_weight_phrase(cmp) +
         "; " + comparison_summary(cmp) +
         (cmp.bias.biased() ? "; biased, accepted by --allow-bias" : "") + ")\n";
  }
  // A check that would pass an all-zero output says so: its verdict carries no weight.
  // (Where every wanted value is 0, an all-zero output is the answer: no warning.)
  if (!cmp.rejects_zero() && cmp.max_abs_want > 0.0) {
    t += a.path + ": warning: this check could not reject an all-zero output (discrimination " +
         py_float_repr(cmp.discrimination) + " >= 1: the tolerance is at least max|want| = " +
         py_float_repr(cmp.max_abs_want) + ")\n";
  }
  return t;
}

}  // namespace

CheckOutcome jax_check(const Case& c, const CaseOptions& a) {
  Found found;
  CheckOutcome o = check_found(c, a, found);
  if (const std::optional<Rejection>& r = found.rejection) {
    std::optional<RuleReport> rule;
    if (r->failure) rule = rule_report(*r->failure, r->mode);
    o.findings = rejected_findings(c.dialect, r->mode, std::move(rule), a.path + ": " + r->why);
  }
  if (const std::optional<Comparison>& cmp = found.comparison) {
    o.findings = compared_findings<Comparison>(
        *cmp, comparison_summary(*cmp),
        py_float_repr(cmp->max_budget_used) + " of tolerance at " + describe_mismatch(*cmp),
        bias_line(*cmp), write_comparison_json, check_text_lines, check_json_text);
  }
  return o;
}

}  // namespace rpa
