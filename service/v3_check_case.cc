#include "service/v3_check_case.h"

#include <memory>
#include <utility>

#include "core/python_repr.h"
#include "kernel/v3_kernel.h"
#include "reference/v3_reference.h"
#include "service/jax_run_case.h"
#include "service/number_text.h"
#include "validation/v3_validate.h"

namespace rpa {
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
using Found = CheckFound<V3Rejection, V3Comparison>;

CheckOutcome check_found(const Case& c, const CaseOptions& a, Found& found) {
  CheckOutcome o;
  o.usage = false;  // the options are right; the case does not fit them
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
      found.rejection = V3Rejection{.failure = std::move(*f), .mode = a.validate.mode};
    }
  } else {
    found.rejection = v3_compute_rejection(c, a.validate.mode);
  }
  if (found.rejection) {
    o.verdict = CheckVerdict::kRejected;
    o.detail = v3_rejection_line(a, c.dialect, *found.rejection);
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
    found.comparison = r.cmp;
    if (found.comparison->agree()) o.verdict = CheckVerdict::kAgree;
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
  found.comparison = v3_compare(c.dialect, in, c.v3_params, ref, out, cache);
  o.verdict = found.comparison->agree() ? CheckVerdict::kAgree : CheckVerdict::kMismatch;
  return o;
}

}  // namespace

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

std::string check_json_text(const V3Comparison& cmp, const CheckOutcome& o, const CaseOptions& a) {
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
  write_v3_comparison_json(j, cmp);
  j.key("seconds").value(o.seconds);
  return j.end_object().str();
}

std::string check_text_lines(const V3Comparison& cmp, const CheckOutcome& o, const CaseOptions& a) {
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

CheckOutcome v3_check(const Case& c, const CaseOptions& a) {
  Found found;
  CheckOutcome o = check_found(c, a, found);
  if (const std::optional<V3Rejection>& r = found.rejection) {
    o.findings = rejected_findings(c.dialect, r->mode, rule_report(r->failure, r->mode),
                                   v3_rejection_line(a, c.dialect, *r));
  }
  if (found.comparison) {
    const V3Comparison& cmp = *found.comparison;
    o.findings = compared_findings<V3Comparison>(cmp, v3_comparison_summary(cmp),
                                                 describe_v3_comparison(cmp), "",
                                                 write_v3_comparison_json, check_text_lines,
                                                 check_json_text);
  }
  return o;
}

}  // namespace rpa
