#include <cmath>
#include <cstdio>

#include "kernel/python_repr.h"
#include "kernel/tiled_kernel.h"
#include "cli/cli_args.h"
#include "cli/commands.h"
#include "oracle/compare.h"
#include "cli/exit_codes.h"
#include "reference/dense_reference.h"

namespace rpa {
namespace {

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
  j.key("compared").value(c.compared).key("mismatches").value(c.mismatches);
  if (c.first) {
    const ElementMismatch& m = *c.first;
    j.key("first").begin_object();
    j.key("seq").value(m.seq).key("row_in_seq").value(m.row_in_seq).key("row").value(m.row);
    j.key("head").value(m.head).key("col").value(m.col);
    j.key("got").value(m.got).key("want").value(m.want).key("allowed").value(m.allowed);
    j.end_object();
  }
}

}  // namespace

int check_command(const std::vector<std::string_view>& args) {
  CliArgs a;
  if (std::string err = parse_cli_args(args,
                                       {"--mode", "--json", "--threads", "--literal", "--schedule",
                                        "--oracle", "--semantics", "--target", "--max-bytes"},
                                       a);
      !err.empty()) {
    return usage_error(err);
  }
  const bool literal_oracle = a.oracle == "literal";
  if (literal_oracle && a.literal) {
    return usage_error("--oracle literal compares the case's `out` with the literal schedule; "
                       "--schedule does not apply");
  }
  if (literal_oracle && a.semantics) {
    return usage_error("--semantics chooses the dense reference's rounding points; --oracle "
                       "literal compares with the literal schedule instead");
  }
  const std::optional<Case> c = read_case_or_report(a);
  if (!c) return kExitUnreadable;
  if (a.literal && c->out) {
    return usage_error(
        "--schedule literal applies to the tiled kernel; the case holds its own `out`");
  }
  if (literal_oracle && !c->out) {
    return usage_error("--oracle literal needs a case with `out` (an output to check)");
  }
  if (literal_oracle && a.validate.mode == Mode::kJax ? !literal_jax_ok(*c, a)
                                                      : !validate_for_compute(*c, a)) {
    return kExitRejected;
  }
  // The output under test: the case's own `out`, else the tiled kernel's.
  const Tensor out = c->out ? *c->out : tiled_attention(c->inputs, c->params, kernel_options(a));
  const char* const checked = c->out      ? "out"
                              : a.literal ? "the tiled kernel (literal schedule)"
                                          : "the tiled kernel";
  if (out.shape() != c->inputs.q.shape() || out.dtype() != c->inputs.q.dtype()) {
    std::fprintf(stderr, "rpa: %s: member 'out.npy' is %s %s, expected q's %s %s\n", a.path.c_str(),
                 std::string(dtype_name(out.dtype())).c_str(), shape_repr(out.shape()).c_str(),
                 std::string(dtype_name(c->inputs.q.dtype())).c_str(),
                 shape_repr(c->inputs.q.shape()).c_str());
    return kExitUnreadable;
  }

  // The oracle: the dense reference (the definition), or the literal schedule (what the
  // Pallas kernel computes, also where the definition does not hold).
  Tensor want;
  Tolerance tol;
  if (literal_oracle) {
    CliArgs literal = a;
    literal.literal = true;
    const KernelOptions options = kernel_options(literal);
    want = tiled_attention(c->inputs, c->params, options);
    tol = schedule_tolerance(
        c->inputs, c->params,
        plan_kernel(c->inputs, c->params, options.target, options.untuned_blocks));
  } else {
    ReferenceResult ref = dense_reference(c->inputs, c->params, a.reference_semantics());
    tol = tolerance_for_case(c->inputs, c->params, ref);
    want = std::move(ref.out);
  }
  const std::string oracle =
      literal_oracle ? "the literal schedule"
                     : "the reference (" + semantics_label(a.reference_semantics()) + ")";
  const Comparison cmp = compare_outputs(out, want, PagedKvView(c->inputs), tol);
  if (a.json) {
    JsonWriter j;
    j.begin_object().key("valid").value(true).key("mode").value(mode_name(a.validate.mode));
    j.key("checked").value(c->out ? "out" : "kernel");
    j.key("oracle").value(literal_oracle ? "literal" : "reference");
    if (!literal_oracle) j.key("semantics").value(semantics_name(a.reference_semantics()));
    if (!c->out) j.key("schedule").value(a.literal ? "literal" : "default");
    write_comparison_json(j, cmp);
    std::printf("%s\n", j.end_object().str().c_str());
  } else {
    if (cmp.agree()) {
      std::printf("%s: %s agrees with %s (%s; max abs err %s, atol %s, rtol %s", a.path.c_str(),
                  checked, oracle.c_str(), describe_mismatch(cmp).c_str(),
                  py_float_repr(cmp.max_abs_err).c_str(), py_float_repr(tol.atol).c_str(),
                  py_float_repr(tol.rtol).c_str());
      if (tol.element_atol) {
        std::printf(", per-element logit term up to %s",
                    py_float_repr(tol.max_element_atol()).c_str());
      }
      std::printf("; discrimination %s)\n", py_float_repr(cmp.discrimination).c_str());
    } else {
      std::printf("%s: MISMATCH between %s and %s at %s; discrimination %s\n", a.path.c_str(),
                  checked, oracle.c_str(), describe_mismatch(cmp).c_str(),
                  py_float_repr(cmp.discrimination).c_str());
    }
    // A check that would pass an all-zero output says so: its verdict carries no weight.
    // (Where every wanted value is 0, an all-zero output is the answer: no warning.)
    if (!cmp.rejects_zero() && cmp.max_abs_want > 0.0) {
      std::printf("%s: warning: this check could not reject an all-zero output (discrimination "
                  "%s >= 1: the tolerance is at least max|want| = %s)\n",
                  a.path.c_str(), py_float_repr(cmp.discrimination).c_str(),
                  py_float_repr(cmp.max_abs_want).c_str());
    }
  }
  return cmp.agree() ? kExitOk : kExitMismatch;
}

}  // namespace rpa
