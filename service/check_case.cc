#include "service/check_case.h"

#include <chrono>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "core/python_repr.h"
#include "service/dialect_ops.h"
#include "service/number_text.h"

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

CheckOutcome check_case(const Case& c, const CaseOptions& a) {
  const auto start = std::chrono::steady_clock::now();
  CheckOutcome o = dialect_ops(c.dialect).check(c, a);
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

std::string check_json(const CheckOutcome& o, const CaseOptions& a) {
  return o.findings.json(o, a);
}

std::string check_text(const CheckOutcome& o, const CaseOptions& a) {
  return o.findings.text(o, a);
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

CheckFindings rejected_findings(Dialect d, Mode mode, std::optional<RuleReport> rule,
                                std::string line) {
  CheckFindings f;
  f.rejected_mode = mode;
  f.rejection_line = std::move(line);
  if (rule) {
    JsonWriter j;
    j.begin_object().key("valid").value(false).key("mode").value(mode_label(d, mode));
    if (dialect_ops(d).reports_dialect) j.key("dialect").value(dialect_name(d));
    write_rule_json(j, *rule);
    f.rejection_json = j.end_object().str();
    f.rejected_rule = RejectedRule{std::move(*rule), mode};
  }
  return f;
}

}  // namespace rpa
