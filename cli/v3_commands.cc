#include "cli/v3_commands.h"

#include <cstdio>
#include <utility>
#include <vector>

#include "cli/exit_codes.h"
#include "kernel/v3_validate.h"
#include "reference/v3_reference.h"

namespace rpa {

std::string_view v3_mode_name(Mode m) { return m == Mode::kJax ? "native" : "strict"; }

std::string v3_failure_line(const V3Failure& f, Mode mode) {
  const V3RuleInfo& info = v3_rule_info(f.rule);
  std::string line = std::string(info.name) + ": " + f.message;
  if (mode == Mode::kJax && info.crash) {
    line += " [tpu-inference crashes or misbehaves here instead of raising ValueError]";
  }
  return line;
}

void write_v3_failure_json(JsonWriter& j, const V3Failure& f, Mode mode) {
  const V3RuleInfo& info = v3_rule_info(f.rule);
  j.key("rule").value(info.name).key("message").value(f.message);
  if (mode == Mode::kJax && info.crash) j.key("crash").value(true);
}

std::optional<V3Rejection> v3_compute_rejection(const Case& c, Mode mode) {
  for (Mode m : {mode, Mode::kStrict}) {
    if (auto f = v3_validate(c.dialect, c.v3_inputs, c.v3_params, m)) {
      return V3Rejection{.failure = std::move(*f), .mode = m};
    }
    if (m == Mode::kStrict) break;
  }
  return std::nullopt;
}

int validate_v3(const Case& c, const CliArgs& a) {
  const Mode mode = a.validate.mode;
  std::vector<V3Failure> failures;
  if (a.all) {
    failures = v3_validate_all(c.dialect, c.v3_inputs, c.v3_params, mode);
  } else if (auto f = v3_validate(c.dialect, c.v3_inputs, c.v3_params, mode)) {
    failures.push_back(std::move(*f));
  }
  const bool valid = failures.empty();
  const std::string mode_text(v3_mode_name(mode));
  const std::string dialect(dialect_name(c.dialect));
  if (a.json) {
    JsonWriter j;
    j.begin_object().key("valid").value(valid).key("mode").value(mode_text);
    j.key("dialect").value(dialect);
    if (!valid) write_v3_failure_json(j, failures.front(), mode);
    if (a.all) {
      j.key("failures").begin_array();
      for (const V3Failure& f : failures) {
        j.begin_object();
        write_v3_failure_json(j, f, mode);
        j.end_object();
      }
      j.end_array();
    }
    j.end_object();
    std::printf("%s\n", j.str().c_str());
  } else if (valid) {
    std::printf("%s: valid in %s mode (%s)\n", a.path.c_str(), mode_text.c_str(), dialect.c_str());
  }
  for (const V3Failure& f : failures) {
    std::fprintf(stderr, "%s: rejected in %s mode (%s) by %s\n", a.path.c_str(), mode_text.c_str(),
                 dialect.c_str(), v3_failure_line(f, mode).c_str());
  }
  return valid ? kExitOk : kExitRejected;
}

int run_v3(Case c, const CliArgs& a) {
  const std::string dialect(dialect_name(c.dialect));
  if (a.impl != "reference") {
    std::fprintf(stderr,
                 "rpa: the tiled kernel does not compute the v3 dialects yet (%s): use --impl "
                 "reference\n",
                 dialect.c_str());
    return kExitUsage;
  }
  if (const std::optional<V3Rejection> r = v3_compute_rejection(c, a.validate.mode)) {
    const std::string mode_text(v3_mode_name(r->mode));
    if (a.json) {
      JsonWriter j;
      j.begin_object().key("valid").value(false).key("mode").value(mode_text);
      j.key("dialect").value(dialect);
      write_v3_failure_json(j, r->failure, r->mode);
      std::printf("%s\n", j.end_object().str().c_str());
    }
    std::fprintf(stderr, "%s: rejected in %s mode (%s) by %s\n", a.path.c_str(), mode_text.c_str(),
                 dialect.c_str(), v3_failure_line(r->failure, r->mode).c_str());
    return kExitRejected;
  }
  const Semantics semantics = a.reference_semantics();
  V3ReferenceResult result = v3_reference(c.dialect, c.v3_inputs, c.v3_params, semantics);
  // Strict validity makes distribution[2] a sequence count and cu_q_lens[k] a row count.
  const int64_t rows = c.v3_inputs.cu_q_lens.int_at(c.v3_inputs.distribution.int_at(2));
  if (!a.output.empty()) {
    c.out = std::move(result.out);
    c.kv_cache_out = std::move(result.kv_cache);
    if (std::string err; !write_case_file(a.output, c, &err)) {
      std::fprintf(stderr, "rpa: %s\n", err.c_str());
      return kExitUnreadable;
    }
  }
  if (a.json) {
    JsonWriter j;
    j.begin_object().key("valid").value(true).key("impl").value(a.impl);
    j.key("dialect").value(dialect);
    j.key("rows").value(rows);
    j.key("semantics").value(semantics_name(semantics));
    if (!a.output.empty()) j.key("output").value(a.output);
    std::printf("%s\n", j.end_object().str().c_str());
  } else {
    std::printf("%s: computed %lld rows of %s with the reference (%s)%s%s\n", a.path.c_str(),
                static_cast<long long>(rows), dialect.c_str(), semantics_label(semantics).c_str(),
                a.output.empty() ? "" : ", wrote ", a.output.c_str());
  }
  return kExitOk;
}

}  // namespace rpa
