#include "cli/bench_production.h"

#include <cstdio>
#include <string>
#include <vector>

#include "harness/production_bench.h"
#include "harness/workloads.h"
#include "cli/cli_args.h"
#include "cli/exit_codes.h"
#include "core/dialect.h"
#include "service/json_writer.h"

namespace rpa {
namespace {

constexpr std::string_view kPrefix = "production";

std::string call_names() {
  std::string names;
  for (const bench::ProductionBenchCall& c : bench::production_bench_calls()) {
    names += (names.empty() ? "" : ", ") + std::string(c.name);
  }
  return names;
}

void print_call(const bench::ProductionTiming& t) {
  std::printf("%s (rpa gen --profile production --dialect %s --seed %llu): %s\n",
              std::string(t.call.name).c_str(), std::string(dialect_name(t.call.dialect)).c_str(),
              static_cast<unsigned long long>(t.call.seed), std::string(t.call.why).c_str());
  std::printf("  %lld sequences, %lld rows, kv_len up to %lld, %.3g multiply-adds, %.0f MiB of "
              "arrays\n",
              static_cast<long long>(t.num_seqs), static_cast<long long>(t.rows),
              static_cast<long long>(t.max_kv_len), static_cast<double>(t.macs),
              static_cast<double>(t.memory_bytes) / (1 << 20));
  std::string line;
  for (const bench::ProductionStage& s : t.stages) {
    char cell[96];
    std::snprintf(cell, sizeof cell, "%s%s %.2f s%s", line.empty() ? "" : " | ", s.name.c_str(),
                  s.seconds, !s.checked ? "" : s.agree ? " (agrees)" : " (DISAGREES)");
    line += cell;
  }
  std::printf("  %s; total %.1f s\n", line.c_str(), t.total_seconds());
  for (const bench::ProductionStage& s : t.stages) {
    if (!s.agree) std::printf("  %s: %s\n", s.name.c_str(), s.mismatch.c_str());
  }
}

void print_json(const std::vector<bench::ProductionTiming>& timings, std::string_view preset,
                int threads, const std::string& date, const std::string& load) {
  JsonWriter j;
  j.begin_object();
  j.key("preset").value(preset).key("date").value(date).key("cpu").value(bench::cpu_model_name());
  j.key("threads").value(threads).key("load_average").value(load);
  bool all = true;
  j.key("calls").begin_array();
  for (const bench::ProductionTiming& t : timings) {
    all = all && t.agree();
    j.begin_object();
    j.key("name").value(t.call.name).key("dialect").value(dialect_name(t.call.dialect));
    j.key("seed").value(static_cast<int64_t>(t.call.seed)).key("spec").value(t.spec);
    j.key("num_seqs").value(t.num_seqs).key("rows").value(t.rows).key("max_kv_len").value(t.max_kv_len);
    j.key("macs").value(t.macs).key("memory_bytes").value(t.memory_bytes);
    j.key("stages").begin_array();
    for (const bench::ProductionStage& s : t.stages) {
      j.begin_object().key("name").value(s.name).key("seconds").value(s.seconds);
      if (s.checked) j.key("agree").value(s.agree);
      if (!s.agree) j.key("mismatch").value(s.mismatch);
      j.end_object();
    }
    j.end_array();
    j.key("total_seconds").value(t.total_seconds()).key("agree").value(t.agree());
    j.end_object();
  }
  j.end_array();
  j.key("all_agree").value(all);
  j.end_object();
  std::printf("%s\n", j.str().c_str());
}

}  // namespace

bool is_production_preset(std::string_view preset) {
  return preset == kPrefix || (preset.starts_with(kPrefix) && preset.size() > kPrefix.size() &&
                               preset[kPrefix.size()] == ':');
}

int bench_production(std::string_view preset, int threads, bool json) {
  std::vector<bench::ProductionBenchCall> calls;
  const std::string_view only = preset == kPrefix ? "" : preset.substr(kPrefix.size() + 1);
  for (const bench::ProductionBenchCall& c : bench::production_bench_calls()) {
    if (only.empty() || c.name == only) calls.push_back(c);
  }
  if (calls.empty()) {
    return usage_error("--preset production:NAME takes one of " + call_names() + "; got '" +
                       std::string(only) + "'");
  }
  const std::string date = bench::now_string();
  const std::string load_before = bench::load_average();
  std::vector<bench::ProductionTiming> timings;
  for (size_t k = 0; k < calls.size(); ++k) {
    const bench::ProductionBenchCall& c = calls[k];
    timings.push_back(bench::time_production_call(c, threads, [&](std::string_view stage) {
      std::fprintf(stderr, "rpa bench: [%zu/%zu] %s: %s\n", k + 1, calls.size(),
                   std::string(c.name).c_str(), std::string(stage).c_str());
    }));
  }
  const std::string load = load_before + " at start, " + bench::load_average() + " at end";
  if (json) {
    print_json(timings, preset, threads, date, load);
  } else {
    std::printf("rpa bench --preset %s: %s, %s, tiled kernel on %s threads; load average %s\n"
                "each stage run once; the kernels' outputs checked against the reference at the "
                "production properties' tolerance\n\n",
                std::string(preset).c_str(), date.c_str(), bench::cpu_model_name().c_str(),
                threads == 0 ? "all" : std::to_string(threads).c_str(), load.c_str());
    for (const bench::ProductionTiming& t : timings) print_call(t);
  }
  bool all = true;
  for (const bench::ProductionTiming& t : timings) all = all && t.agree();
  if (!all) std::fprintf(stderr, "rpa bench: ERROR: a kernel disagreed with the reference (see above)\n");
  return all ? kExitOk : kExitMismatch;
}

}  // namespace rpa
