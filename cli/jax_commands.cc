#include "cli/jax_commands.h"

#include <cstdio>
#include <string>
#include <utility>

#include "cli/exit_codes.h"

namespace rpa {

void report_rejection(const CliArgs& args, const Rejection& r) {
  std::fprintf(stderr, "%s: %s\n", args.path.c_str(), r.why.c_str());
  if (args.json && r.failure) {
    JsonWriter j;
    j.begin_object().key("valid").value(false).key("mode").value(mode_name(r.mode));
    write_rule_json(j, rule_report(*r.failure, r.mode));
    j.end_object();
    std::printf("%s\n", j.str().c_str());
  }
}

int run_jax(Case c, const CliArgs& a) {
  RunOutcome run = run_case(c, a);
  if (run.rejection) {
    report_rejection(a, *run.rejection);
    return kExitRejected;
  }
  Tensor out = std::move(*run.out);
  const RunReport report = run_report(c, a);
  const int64_t rows = report.rows;
  if (!a.output.empty()) {
    c.out = std::move(out);
    if (std::string err; !write_case_file(a.output, c, &err)) {
      std::fprintf(stderr, "rpa: %s\n", err.c_str());
      return kExitUnreadable;
    }
  }
  if (a.json) {
    JsonWriter j;
    j.begin_object().key("valid").value(true).key("impl").value(a.impl);
    j.key("rows").value(rows);
    if (a.impl == "reference") j.key("semantics").value(semantics_name(a.reference_semantics()));
    if (report.plan) {
      const KernelPlan& plan = *report.plan;
      j.key("schedule").value(a.literal ? "literal" : "default");
      j.key("blocks").begin_array();
      j.value(plan.blocks.kv_pages_per_block).value(plan.blocks.queries_per_block).end_array();
      j.key("heads_per_block").begin_array();
      j.value(plan.heads.q_heads).value(plan.heads.combined_kv_heads).end_array();
    }
    if (!a.output.empty()) j.key("output").value(a.output);
    std::printf("%s\n", j.end_object().str().c_str());
  } else {
    const std::string what =
        a.impl == "kernel" ? a.impl : a.impl + " (" + semantics_label(a.reference_semantics()) + ")";
    std::printf("%s: computed %lld rows with the %s%s%s\n", a.path.c_str(),
                static_cast<long long>(rows), what.c_str(), a.output.empty() ? "" : ", wrote ",
                a.output.c_str());
  }
  return kExitOk;
}

}  // namespace rpa
