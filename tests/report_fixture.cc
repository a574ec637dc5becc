// Writes a campaign report (cli/campaign_report.h) whose run found something, which a run on
// a correct kernel cannot: tests/cli_report_test.py renders it in Chromium and checks the
// findings table, the replay commands and the case files next to the page. The findings are
// real cases (a generated strict-valid case, its raw-call bytes, a generated v3 case) under
// made-up verdicts.
// Usage: report_fixture DIR
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <vector>

#include "cli/campaign_report.h"
#include "cli/campaign_stats.h"
#include "casegen/jax_raw_call.h"
#include "casegen/jax_case_codec.h"
#include "casegen/generate.h"
#include "casegen/v3_generate.h"
#include "casegen/jax_build_case.h"
#include "casegen/jax_materialize.h"
#include "casegen/random_source.h"
#include "casegen/v3_build_case.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: report_fixture DIR\n");
    return 64;
  }
  using namespace rpa;
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  // The first small strict-valid case that fits the raw-call element budget.
  props::BuildOptions valid;
  valid.max_mutations = 0;
  valid.min_seqs = 1;
  std::optional<props::CaseSpec> spec;
  std::optional<std::vector<uint8_t>> raw;
  for (uint64_t seed = 1; seed < 1000 && !raw; ++seed) {
    props::RandomSource source(seed, 10);
    spec = props::build_case(source, valid);
    const props::Materialized m = props::materialize(*spec);
    raw = fuzz::encode_raw_call({m.inputs, m.params});
    if (raw && raw->empty()) raw.reset();
  }
  if (!raw) {
    std::fprintf(stderr, "report_fixture: no case within the raw-call element budget\n");
    return 1;
  }

  Stats st;
  st.max_size = 30;
  st.cases = 3;
  st.validation_checks = 6;
  st.kernel_checks = 1;
  st.verdicts[0]["valid"] = 1;
  st.verdicts[1]["valid"] = 1;
  st.verdicts[0]["q_rank"] = 2;
  st.pair_checks["float32/float32"] = 1;
  st.worst_budget["float32/float32"] = 2.5;
  st.budget_histogram["float32/float32"][budget_bin(2.5)] = 1;
  record(st, {0, "kernel vs reference (kernel semantics)", "made up: sequence 0, row 0 differs",
              props::spec_hex(*spec), ""});
  record(st, {1, "raw call", "made up: a raw call problem", "", props::to_hex(*raw)});
  // A tpu-inference v3 case (a generated valid kernel.py one) under a made-up kernel verdict.
  props::V3BuildOptions v3;
  v3.dialect = Dialect::kTpuInferenceV3;
  const props::V3CaseSpec v3_spec = props::seeded_v3_spec(1, 10, v3);
  st.v3_cases["tpu_inference_v3"] = 1;
  st.v3_verdicts[0]["tpu_inference_v3"]["valid"] = 1;
  st.v3_verdicts[1]["tpu_inference_v3"]["valid"] = 1;
  st.v3_kernel_checks = 1;
  st.v3_pair_checks["tpu_inference_v3 float32/float32"] = 1;
  st.v3_worst_share["tpu_inference_v3 float32/float32"] = 2.0;
  st.v3_tolerance_at_worst["tpu_inference_v3 float32/float32"] = 1e-6;
  st.v3_key_weights["tpu_inference_v3 float32/float32"] = {0.0031, 0.0004, 0.02};
  st.v3_could_not_reject_zero = 1;
  st.v3_past_float32_checks = 1;
  st.v3_past_float32_pairs = 6;
  record(st, {2, "v3 kernel vs reference (kernel semantics)",
              "made up: tpu_inference_v3: cache equal; out: row 0 differs",
              props::v3_spec_hex(v3_spec), ""});
  record(st, {INT64_MAX, "pallas", "made up: 2 cases differ", "", ""});
  st.pallas = "made up: 3 passed, 2 failed";

  CampaignRun run;
  run.seed = 7;
  run.seconds_asked = 1;
  run.seconds = 1.0;
  run.machine = machine_description();
  run.started = "2026-12-01T00:00:00Z";
  std::ofstream out(dir / "report.html");
  out << campaign_report_html(st, run, write_finding_files(st, dir));
  return out ? 0 : 1;
}
