#include "service/check_case.h"

#include <chrono>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "core/jax_kv_view.h"
#include "core/python_repr.h"
#include "kernel/jax_kernel.h"
#include "kernel/v3_kernel.h"
#include "oracle/jax_tolerance.h"
#include "reference/jax_reference.h"
#include "reference/v3_reference.h"
#include "service/number_text.h"
#include "validation/v3_validate.h"

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

V3OutCheck v3_check_out(const Case& c, Semantics semantics, bool literal,
                        const V3ProgramOptions& program) {
  V3OutCheck r;
  if (!literal) {
    const V3ReferenceResult ref = v3_reference(c.dialect, c.v3_inputs, c.v3_params, semantics);
    r.cmp = v3_compare(c.dialect, c.v3_inputs, c.v3_params, ref, *c.out, *c.kv_cache_out);
    return r;
  }
  try {
    const V3LiteralRun lit = v3_literal_run(c.dialect, c.v3_inputs, c.v3_params, program);
    r.cmp = v3_compare_literal(c.dialect, c.v3_inputs, lit, *c.out, *c.kv_cache_out);
  } catch (const V3ProgramError& e) {
    r.kernel_stop = v3_kernel_stop(e);
  }
  return r;
}

namespace {

// A v3 case: its `out` and `kv_cache_out` (else the tiled kernel's, or with --schedule
// literal the literal v3 schedule's) against the v3 reference; with --oracle literal, its `out`
// and `kv_cache_out` against the literal v3 schedule under the schedule tolerance, on any input
// the mode accepts (native: any call tpu-inference's validators accept).
CheckOutcome check_v3(const Case& c, const CaseOptions& a) {
  CheckOutcome o;
  o.dialect = c.dialect;
  o.has_out = c.out.has_value();
  o.has_kv_cache_out = c.kv_cache_out.has_value();
  const bool literal_oracle = a.oracle == "literal";
  const auto usage = [&o](std::string why) {
    o.verdict = CheckVerdict::kNotApplicable;
    o.detail = std::move(why);
    return o;
  };
  if (a.literal && (o.has_out || o.has_kv_cache_out)) {
    return usage("--schedule literal applies to the tiled kernel; the case holds its own `out` / "
                 "`kv_cache_out`");
  }
  if (literal_oracle && !(o.has_out && o.has_kv_cache_out)) {
    return usage("--oracle literal needs a v3 case with `out` and `kv_cache_out` (the kernel's "
                 "results to check)");
  }
  if (literal_oracle) {
    if (auto f = v3_validate(c.dialect, c.v3_inputs, c.v3_params, a.validate.mode)) {
      o.v3_rejection = V3Rejection{.failure = std::move(*f), .mode = a.validate.mode};
    }
  } else {
    o.v3_rejection = v3_compute_rejection(c, a.validate.mode);
  }
  if (o.v3_rejection) {
    o.verdict = CheckVerdict::kRejected;
    o.detail = v3_rejection_line(a, c.dialect, *o.v3_rejection);
    o.detail.erase(0, a.path.size() + 2);  // the line without "PATH: "
    return o;
  }
  const V3Inputs& in = c.v3_inputs;
  // Each member against the array it stands for: the reader checks names, not shapes.
  const auto misfit = [&](const char* member, const Tensor& got, const Tensor& like,
                          const char* what) -> std::optional<std::string> {
    if (got.shape() == like.shape() && got.dtype() == like.dtype()) return std::nullopt;
    return a.path + ": member '" + member + ".npy' is " + std::string(dtype_name(got.dtype())) +
           " " + shape_repr(got.shape()) + ", expected " + what + " " +
           std::string(dtype_name(like.dtype())) + " " + shape_repr(like.shape());
  };
  for (const auto& m : {c.out ? misfit("out", *c.out, in.queries, "the queries'") : std::nullopt,
                        c.kv_cache_out ? misfit("kv_cache_out", *c.kv_cache_out, in.kv_cache,
                                                "kv_cache's")
                                       : std::nullopt}) {
    if (m) {
      o.verdict = CheckVerdict::kUnreadable;
      o.detail = *m;
      return o;
    }
  }
  // The literal schedule as the oracle: the case's out and kv_cache_out against it.
  if (literal_oracle) {
    V3OutCheck r;
    try {
      r = v3_check_out(c, a.reference_semantics(), true, v3_program_options(a));
    } catch (const std::invalid_argument& e) {  // what the literal schedule cannot take
      return usage(e.what());
    }
    o.verdict = CheckVerdict::kMismatch;
    if (r.kernel_stop) {
      o.detail = v3_kernel_stop_line(*r.kernel_stop) + ", yet the case holds its out and kv_cache_out";
      return o;
    }
    o.checked = "out and kv_cache_out";
    o.oracle = "the literal v3 schedule (TPU v" + std::to_string(v3_program_options(a).tpu_version) + ")";
    o.v3_cmp = r.cmp;
    if (o.v3_cmp->agree()) o.verdict = CheckVerdict::kAgree;
    return o;
  }
  // The literal schedule as what is checked.
  std::optional<V3KernelResult> kernel;
  if (a.literal) {
    try {
      kernel = v3_literal_attention(c.dialect, in, c.v3_params, v3_program_options(a));
    } catch (const std::invalid_argument& e) {  // what the literal schedule cannot take
      return usage(e.what());
    } catch (const V3ProgramError& e) {
      o.verdict = CheckVerdict::kMismatch;
      o.detail = v3_kernel_stop_line(v3_kernel_stop(e));
      return o;
    }
  }
  const Semantics semantics = a.reference_semantics();
  V3ReferenceResult ref = v3_reference(c.dialect, in, c.v3_params, semantics);
  if (!kernel && !o.has_out && !o.has_kv_cache_out) {
    kernel = v3_tiled_attention(c.dialect, in, c.v3_params, kernel_options(a));
  }
  // A member the case lacks is the reference's own: compared with itself, it adds nothing.
  const Tensor& out = kernel ? kernel->out : c.out ? *c.out : ref.out;
  const Tensor& cache = kernel ? kernel->kv_cache : c.kv_cache_out ? *c.kv_cache_out : ref.kv_cache;
  o.checked = a.literal  ? "the literal v3 schedule's out and kv_cache"
              : kernel   ? "the tiled kernel's out and kv_cache"
              : o.has_out && o.has_kv_cache_out ? "out and kv_cache_out"
              : o.has_out                       ? "out"
                                                : "kv_cache_out";
  if (!kernel && !o.has_out) o.not_checked = "out";
  if (!kernel && !o.has_kv_cache_out) o.not_checked = "kv_cache_out";
  o.oracle = "the v3 reference (" + semantics_label(semantics) + ")";
  o.v3_cmp = v3_compare(c.dialect, in, c.v3_params, ref, out, cache);
  o.verdict = o.v3_cmp->agree() ? CheckVerdict::kAgree : CheckVerdict::kMismatch;
  return o;
}

CheckOutcome check_untimed(const Case& c, const CaseOptions& a) {
  if (is_v3(c.dialect)) return check_v3(c, a);
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
  o.cmp = compare_outputs(out, want, kv_view(c.inputs), tol);
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

}  // namespace

CheckOutcome check_case(const Case& c, const CaseOptions& a) {
  const auto start = std::chrono::steady_clock::now();
  CheckOutcome o = check_untimed(c, a);
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return o;
}

CheckOutcome check_file(const CaseOptions& a) {
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

std::string v3_power_phrase(const V3Comparison& c) {
  const double w = c.min_detectable_key_weight, all = c.key_weight_every_row;
  std::string s;
  if (!(w < 1.0)) {
    s = "catches no dropped key";
  } else {
    s = "catches a dropped key of weight >= " + formatted(w, "%.2g");
    if (all > w) s += " (in every row: " + (all < 1.0 ? formatted(all, "%.2g") : std::string("none")) + ")";
  }
  return s + (c.rejects_zero ? ", rejects an all-zero output" : ", accepts an all-zero output");
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

namespace {

void write_bias_json(JsonWriter& j, const BiasStats& b) {
  j.key("bias").begin_object();
  j.key("biased").value(b.biased()).key("elements").value(b.elements);
  j.key("units").value(b.units).key("exact_share").value(b.exact_share());
  j.key("mean_ulp").value(b.mean_signed()).key("se_ulp").value(b.se_signed());
  j.key("mean_toward_zero_ulp").value(-b.mean_magnitude());
  j.key("se_toward_zero_ulp").value(b.se_magnitude());
  j.end_object();
}

}  // namespace

void write_comparison_json(JsonWriter& j, const Comparison& c) {
  j.key("agree").value(c.agree());
  j.key("max_abs_err").value(c.max_abs_err).key("max_rel_err").value(c.max_rel_err);
  j.key("atol").value(c.tol.atol).key("rtol").value(c.tol.rtol);
  j.key("max_element_atol").value(c.tol.max_element_atol());
  j.key("max_tolerance_used").value(c.max_budget_used);
  j.key("max_abs_want").value(c.max_abs_want);
  // Infinite when nothing nonzero was compared: JSON has no infinity, so null.
  if (std::isfinite(c.discrimination)) {
    j.key("discrimination").value(c.discrimination);
  } else {
    j.key("discrimination").null();
  }
  j.key("rejects_zero").value(c.rejects_zero());
  // The least weight of a dropped key sure to be caught (Comparison): null when nothing is
  // guaranteed (infinite: no value scale or nothing compared).
  for (const auto& [name, w] : {std::pair{"min_detectable_key_weight", c.min_detectable_key_weight},
                                std::pair{"key_weight_every_row", c.key_weight_every_row}}) {
    if (std::isfinite(w)) {
      j.key(name).value(w);
    } else {
      j.key(name).null();
    }
  }
  j.key("compared").value(c.compared).key("mismatches").value(c.mismatches);
  if (c.first) {
    const ElementMismatch& m = *c.first;
    j.key("first").begin_object();
    j.key("seq").value(m.seq).key("row_in_seq").value(m.row_in_seq).key("row").value(m.row);
    j.key("head").value(m.head).key("col").value(m.col);
    j.key("got").value(m.got).key("want").value(m.want).key("allowed").value(m.allowed);
    j.end_object();
  }
  write_bias_json(j, c.bias);
}

std::string v3_comparison_summary(const V3Comparison& c) {
  std::string s = fixed(c.max_share, 2) + " of tolerance (max error " +
                  py_float_repr(c.max_abs_err) + ", tolerance there " +
                  py_float_repr(c.tolerance_at_max) + "); ";
  s += c.cache_equal ? std::string("cache equal")
                     : "cache: " + py_int_repr(c.cache_differences) + " elements differ";
  return s;
}

void write_v3_comparison_json(JsonWriter& j, const V3Comparison& c) {
  j.key("agree").value(c.agree());
  j.key("max_abs_err").value(c.max_abs_err).key("tolerance_at_max").value(c.tolerance_at_max);
  j.key("max_tolerance_used").value(c.max_share).key("max_allowed").value(c.max_allowed);
  j.key("compared").value(c.compared).key("mismatches").value(c.mismatches);
  // The power (against the reference and, since issue 47, the literal schedule).
  if (c.power_stated) {
    j.key("rejects_zero").value(c.rejects_zero);
  } else {
    j.key("rejects_zero").null();
  }
  for (const auto& [name, w] : {std::pair{"min_detectable_key_weight", c.min_detectable_key_weight},
                                std::pair{"key_weight_every_row", c.key_weight_every_row}}) {
    if (c.power_stated && std::isfinite(w)) {
      j.key(name).value(w);
    } else {
      j.key(name).null();
    }
  }
  if (c.first) {
    const V3OutMismatch& m = *c.first;
    j.key("first").begin_object();
    j.key("row").value(m.row).key("head").value(m.head).key("col").value(m.col);
    j.key("got").value(m.got).key("want").value(m.want).key("allowed").value(m.allowed);
    j.end_object();
  }
  j.key("cache_equal").value(c.cache_equal).key("cache_differences").value(c.cache_differences);
  if (c.cache_first) {
    const V3CacheMismatch& m = *c.cache_first;
    j.key("cache_first").begin_object();
    j.key("element").value(m.element).key("page").value(m.page).key("slot").value(m.slot);
    j.key("kv_head").value(m.kv_head).key("part").value(m.value ? "V" : "K");
    j.key("lane").value(m.lane).key("got").value(m.got).key("want").value(m.want);
    j.end_object();
  }
}

namespace {

std::string v3_check_json(const CheckOutcome& o, const CaseOptions& a) {
  JsonWriter j;
  j.begin_object().key("valid").value(true);
  j.key("mode").value(v3_mode_name(a.validate.mode));
  j.key("dialect").value(dialect_name(o.dialect));
  j.key("verdict").value(verdict_name(o.verdict));
  j.key("checked").begin_array();
  if (!o.has_out && !o.has_kv_cache_out) {
    j.value(a.literal ? "literal" : "kernel");
  } else {
    if (o.has_out) j.value("out");
    if (o.has_kv_cache_out) j.value("kv_cache_out");
  }
  j.end_array();
  if (!o.not_checked.empty()) {
    j.key("not_checked").begin_array().value(o.not_checked).end_array();
  }
  if (a.oracle == "literal") {
    j.key("oracle").value("literal").key("tpu_version").value(v3_program_options(a).tpu_version);
  } else {
    j.key("oracle").value("reference");
    j.key("semantics").value(semantics_name(a.reference_semantics()));
  }
  write_v3_comparison_json(j, *o.v3_cmp);
  j.key("seconds").value(o.seconds);
  return j.end_object().str();
}

std::string v3_check_text(const CheckOutcome& o, const CaseOptions& a) {
  const V3Comparison& cmp = *o.v3_cmp;
  std::string t = a.path + ": ";
  if (o.verdict == CheckVerdict::kMismatch) {
    t += "MISMATCH between " + o.checked + " and " + o.oracle + ": " +
         describe_v3_comparison(cmp);
  } else {
    const bool both = o.checked.find(" and ") != std::string::npos;
    t += o.checked + (both ? " agree with " : " agrees with ") + o.oracle + " (" +
         describe_v3_comparison(cmp) + ")";
  }
  if (cmp.power_stated) t += "; power: " + v3_power_phrase(cmp);
  if (!o.not_checked.empty()) {
    t += "; " + o.not_checked + " not checked: the case has none";
  }
  return t + "\n";
}

}  // namespace

std::string check_json(const CheckOutcome& o, const CaseOptions& a) {
  if (o.v3_cmp) return v3_check_json(o, a);
  const Comparison& cmp = *o.cmp;
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

std::string check_text(const CheckOutcome& o, const CaseOptions& a) {
  if (o.v3_cmp) return v3_check_text(o, a);
  const Comparison& cmp = *o.cmp;
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

std::string check_options_error(const CaseOptions& a) {
  if (a.oracle == "literal" && a.literal) {
    return "--oracle literal compares the case's `out` with the literal schedule; --schedule "
           "does not apply";
  }
  if (a.oracle == "literal" && a.semantics) {
    return "--semantics chooses the dense reference's rounding points; --oracle literal "
           "compares with the literal schedule instead";
  }
  return "";
}

}  // namespace rpa
