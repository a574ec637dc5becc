#include "cli/v3_commands.h"

#include <cstdio>
#include <utility>
#include <vector>

#include "casefile/case_file.h"
#include "cli/exit_codes.h"
#include "service/json_writer.h"
#include "kernel/v3_kernel.h"
#include "validation/v3_validate.h"

namespace rpa {

void report_v3_rejection(const CliArgs& a, Dialect d, const V3Rejection& r) {
  if (a.json) {
    JsonWriter j;
    j.begin_object().key("valid").value(false).key("mode").value(v3_mode_name(r.mode));
    j.key("dialect").value(dialect_name(d));
    write_rule_json(j, rule_report(r.failure, r.mode));
    std::printf("%s\n", j.end_object().str().c_str());
  }
  std::fprintf(stderr, "%s\n", v3_rejection_line(a, d, r).c_str());
}

int run_v3(Case c, const CliArgs& a) {
  const std::string dialect(dialect_name(c.dialect));
  V3RunOutcome run = v3_run_case(c, a);
  if (run.rejection) {
    report_v3_rejection(a, c.dialect, *run.rejection);
    return kExitRejected;
  }
  if (run.not_applicable) {
    std::fprintf(stderr, "rpa: %s: %s\n", a.path.c_str(), run.not_applicable->c_str());
    return kExitUsage;
  }
  if (run.kernel_stop) {
    if (a.json) {
      JsonWriter j;
      j.begin_object().key("valid").value(true).key("impl").value(a.impl);
      j.key("dialect").value(dialect).key("schedule").value("literal");
      j.key("kernel_stop").value(*run.kernel_stop);
      std::printf("%s\n", j.end_object().str().c_str());
    }
    std::fprintf(stderr, "%s: %s\n", a.path.c_str(), v3_kernel_stop_line(*run.kernel_stop).c_str());
    return kExitMismatch;
  }
  const int64_t rows = a.literal ? c.v3_inputs.queries.dim(0) : v3_rows(c);
  const bool kernel = a.impl == "kernel";
  if (!a.output.empty()) {
    c.out = std::move(run.out);
    c.kv_cache_out = std::move(run.kv_cache);
    if (std::string err; !write_case_file(a.output, c, &err)) {
      std::fprintf(stderr, "rpa: %s\n", err.c_str());
      return kExitUnreadable;
    }
  }
  const Semantics semantics = a.reference_semantics();
  if (a.json) {
    JsonWriter j;
    j.begin_object().key("valid").value(true).key("impl").value(a.impl);
    j.key("dialect").value(dialect);
    j.key("rows").value(rows);
    if (kernel && a.literal) {
      j.key("schedule").value("literal").key("tpu_version").value(int64_t{v3_program_options(a).tpu_version});
    } else if (kernel) {
      j.key("schedule").value("default");
      j.key("kv_pages_per_block").value(v3_kv_pages_per_block(c.dialect, c.v3_inputs, c.v3_params));
    } else {
      j.key("semantics").value(semantics_name(semantics));
    }
    if (!a.output.empty()) j.key("output").value(a.output);
    std::printf("%s\n", j.end_object().str().c_str());
  } else {
    const std::string what = kernel && a.literal ? "the literal v3 schedule"
                             : kernel ? "the tiled kernel"
                                      : "the reference (" + semantics_label(semantics) + ")";
    std::printf("%s: computed %lld rows of %s with %s%s%s\n", a.path.c_str(),
                static_cast<long long>(rows), dialect.c_str(), what.c_str(),
                a.output.empty() ? "" : ", wrote ", a.output.c_str());
  }
  return kExitOk;
}

}  // namespace rpa
