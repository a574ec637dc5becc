// rpa check: one case in detail, or many (several files, or directories) one line each.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "cli/case_paths.h"
#include "cli/cli_args.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/junit_report.h"
#include "core/python_repr.h"
#include "oracle/compare.h"
#include "service/check_case.h"
#include "service/dialect_ops.h"

namespace rpa {
namespace {

// One case, in detail: the form of `rpa check CASE.npz`.
int check_one(const CliArgs& a) {
  const CheckOutcome o = check_file(a);
  switch (o.verdict) {
    case CheckVerdict::kNotApplicable:
      if (!o.usage) {  // one line: the options are right, the case not
        std::fprintf(stderr, "rpa: %s\n", o.detail.c_str());
        return kExitUsage;
      }
      return usage_error(o.detail);
    case CheckVerdict::kUnreadable:
      std::fprintf(stderr, "rpa: %s\n", o.detail.c_str());
      if (a.json) {
        std::printf("%s\n",
                    JsonWriter().begin_object().key("error").value(o.detail).end_object().str().c_str());
      }
      return kExitUnreadable;
    case CheckVerdict::kRejected:
      if (const std::string json = o.findings.rejection_json; a.json && !json.empty()) {
        std::printf("%s\n", json.c_str());
      }
      std::fprintf(stderr, "%s\n", o.findings.rejection_line.c_str());
      return kExitRejected;
    case CheckVerdict::kMismatch:
      if (!o.compared()) {  // the literal schedule stopped: nothing to compare
        if (a.json) {
          std::printf("%s\n", JsonWriter()
                                  .begin_object()
                                  .key("valid").value(true)
                                  .key("dialect").value(dialect_name(o.dialect))
                                  .key("verdict").value("mismatch")
                                  .key("kernel_stop").value(o.detail)
                                  .end_object()
                                  .str()
                                  .c_str());
        } else {
          std::printf("%s: MISMATCH: %s\n", a.path.c_str(), o.detail.c_str());
        }
        return kExitMismatch;
      }
      break;
    default: break;
  }
  std::printf("%s", (a.json ? check_json(o, a) + "\n" : check_text(o, a)).c_str());
  return verdict_exit(o.verdict);
}

// The exit code of many checks: 1 if any disagrees or is biased, else the worst of the rest
// (64 where the options do not apply to a case, over unreadable 3, over rejected 2, over 0).
int worst_exit(const std::vector<CheckVerdict>& verdicts) {
  int code = kExitOk;
  for (const CheckVerdict v : verdicts) {
    const int e = verdict_exit(v);
    if (e == kExitMismatch) return kExitMismatch;
    if (e == kExitUsage || (e == kExitUnreadable && code != kExitUsage) ||
        (e == kExitRejected && code == kExitOk)) {
      code = e;
    }
  }
  return code;
}

// Many cases: one line each on stdout, and a total.
int check_many(const CliArgs& a) {
  const std::vector<CasePath> files = case_files(a.paths);
  std::vector<CheckVerdict> verdicts;
  std::vector<JunitCase> junit;
  int counts[6] = {};
  JsonWriter j;
  if (a.json) j.begin_object().key("cases").begin_array();
  for (const CasePath& f : files) {
    CliArgs one = a;
    one.path = f.path;
    one.json = false;
    const auto start = std::chrono::steady_clock::now();
    CheckOutcome o;
    if (!f.error.empty()) {
      o.verdict = CheckVerdict::kUnreadable;
      o.detail = f.error;
    } else {
      try {
        o = check_file(one);
      } catch (const std::exception& e) {  // a bug in rpa: say so on this case's line, go on
        o = CheckOutcome{};
        o.verdict = CheckVerdict::kUnreadable;
        o.detail = std::string("internal error: ") + e.what();
      }
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    verdicts.push_back(o.verdict);
    ++counts[static_cast<int>(o.verdict)];
    std::string line;
    switch (o.verdict) {
      case CheckVerdict::kAgree:
      case CheckVerdict::kBiased:
        line = o.findings.summary;
        break;
      case CheckVerdict::kMismatch:
        // Without a comparison the literal schedule stopped: nothing compared.
        line = o.compared() ? o.findings.mismatch_line : o.detail;
        break;
      default: line = o.detail;
    }
    if (o.compared() && !o.not_checked.empty()) line += "; " + o.not_checked + " not checked";
    if (a.json) {
      j.begin_object().key("path").value(f.path).key("verdict").value(verdict_name(o.verdict));
      if (dialect_ops(o.dialect).reports_dialect) j.key("dialect").value(dialect_name(o.dialect));
      if (o.compared()) {
        o.findings.write_comparison_json(j);
        if (!o.not_checked.empty()) {
          j.key("not_checked").begin_array().value(o.not_checked).end_array();
        }
      } else {
        j.key("error").value(o.detail);
        if (const std::optional<RejectedRule>& r = o.findings.rejected_rule) {
          j.key("mode").value(mode_label(o.dialect, r->mode));
          write_rule_json(j, r->report);
        }
      }
      j.end_object();
    } else {
      std::printf("%s: %s (%s)\n", f.path.c_str(), std::string(verdict_name(o.verdict)).c_str(),
                  line.c_str());
      std::fflush(stdout);
    }
    JunitCase jc;
    jc.classname = "rpa.check";
    jc.name = f.path;
    jc.seconds = seconds;
    if (o.verdict == CheckVerdict::kMismatch || o.verdict == CheckVerdict::kBiased) {
      jc.outcome = JunitCase::Outcome::kFailure;
    } else if (o.verdict != CheckVerdict::kAgree) {
      jc.outcome = JunitCase::Outcome::kError;
    }
    jc.type = verdict_name(o.verdict);
    jc.message = line;
    if (o.verdict == CheckVerdict::kBiased) jc.details = o.findings.bias_line;
    junit.push_back(std::move(jc));
  }
  const std::string total =
      py_int_repr(static_cast<int64_t>(files.size())) + " cases: " + py_int_repr(counts[0]) +
      " agree, " + py_int_repr(counts[1]) + " mismatch, " + py_int_repr(counts[2]) + " biased, " +
      py_int_repr(counts[3]) + " rejected, " + py_int_repr(counts[4] + counts[5]) +
      " unreadable or not applicable";
  if (a.json) {
    j.end_array().key("total").begin_object();
    for (int v = 0; v < 6; ++v) {
      j.key(verdict_name(static_cast<CheckVerdict>(v))).value(static_cast<int64_t>(counts[v]));
    }
    j.end_object();
    std::printf("%s\n", j.end_object().str().c_str());
  } else {
    std::printf("rpa check: %s\n", total.c_str());
  }
  if (!a.junit.empty()) {
    if (const std::string err = write_junit(a.junit, "rpa check", junit); !err.empty()) {
      std::fprintf(stderr, "rpa: %s\n", err.c_str());
      return kExitUnreadable;
    }
  }
  if (files.empty()) {
    std::string named;
    for (const std::string& p : a.paths) named += (named.empty() ? "" : ", ") + p;
    std::fprintf(stderr, "rpa: no case files (.npz) below %s\n", named.c_str());
    return kExitUnreadable;
  }
  return worst_exit(verdicts);
}

}  // namespace

int check_command(const std::vector<std::string_view>& args) {
  CliArgs a;
  if (std::string err = parse_cli_args(args, kCheckFlags, a, /*many_paths=*/true);
      !err.empty()) {
    return usage_error(err);
  }
  if (std::string err = check_options_error(a); !err.empty()) return usage_error(err);
  if (a.paths.size() > 1 || any_directory(a.paths) || !a.junit.empty()) return check_many(a);
  return check_one(a);
}

}  // namespace rpa
