// cli/campaign_state.h: a campaign's state written and read back gives every field of Stats
// and of the run bit for bit (strings with any byte, doubles of every kind), a file cut short
// or garbled anywhere gives one line naming the file and the line; and merge_into keeps the
// same first findings whichever order shards are merged in (cli/campaign_stats.h).
#include "cli/campaign_state.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cli/campaign_stats.h"

namespace rpa {
namespace {

uint64_t bits(double v) {
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// Every byte value once, and the characters the format escapes.
std::string every_byte() {
  std::string s = "quote \" backslash \\ tab \t newline \n cr \r nul ";
  s += '\0';
  for (int c = 0; c < 256; ++c) s += static_cast<char>(c);
  return s + " utf-8 \xc3\xa9\xe2\x82\xac end \\x41";
}

const double kOdd[] = {std::numeric_limits<double>::quiet_NaN(),
                       -std::numeric_limits<double>::quiet_NaN(),
                       std::numeric_limits<double>::infinity(),
                       -std::numeric_limits<double>::infinity(),
                       -0.0,
                       0.0,
                       std::numeric_limits<double>::denorm_min(),
                       -std::numeric_limits<double>::denorm_min() * 3,
                       std::numeric_limits<double>::min(),
                       std::numeric_limits<double>::max(),
                       0.1,
                       1.0 / 3.0};

Stats full_stats() {
  Stats st;
  st.max_size = 37;
  st.cases = 1001;
  st.mutated = 499;
  st.validation_checks = 2002;
  st.kernel_checks = 250;
  st.raw_calls = 90;
  st.raw_strict_accepted = 40;
  st.raw_ran = 39;
  st.could_not_reject_zero = 3;
  st.v3_kernel_checks = 77;
  st.v3_could_not_reject_zero = 2;
  st.v3_past_float32_checks = 4;
  st.v3_past_float32_pairs = 9;
  st.verdicts[0]["valid"] = 250;
  st.verdicts[0]["q_rank"] = 5;
  st.verdicts[1]["valid"] = 300;
  st.verdicts[1][every_byte()] = 1;
  st.worst_budget["float32/float32"] = 0.43;
  st.worst_budget_reference["float32/float32"] = 0.2;
  st.pair_checks["float32/float32"] = 200;
  st.pair_checks["bfloat16/bfloat16"] = 50;
  int k = 0;
  for (const double v : kOdd) {  // each odd double as a map value under its own key
    const std::string key = "odd " + std::to_string(k++);
    st.worst_budget[key] = v;
    st.worst_budget_reference[key] = -v;
    st.worst_discrimination[key] = v;
    st.pair_checks[key] = k;
    st.v3_worst_share[key] = v;
    st.v3_tolerance_at_worst[key] = v;
    st.v3_pair_checks[key] = k;
  }
  st.key_weights["float32/float32"] = std::vector<double>(std::begin(kOdd), std::end(kOdd));
  st.key_weights["empty"] = {};
  st.v3_key_weights["tpu_inference_v3 bfloat16/bfloat16"] = {1e-300, 5e-324, 0.5};
  st.budget_histogram["float32/float32"] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
  st.budget_histogram["bfloat16/bfloat16"] = {};
  st.biased["bfloat16/bfloat16"] = 4;
  st.v3_cases["tpu_inference_v3"] = 40;
  st.v3_cases["tpu_inference_v3_hd64"] = 37;
  st.v3_mutated["tpu_inference_v3"] = 19;
  st.v3_budget_histogram["tpu_inference_v3 bfloat16/bfloat16"] = {0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 37, 0};
  st.v3_verdicts[0]["tpu_inference_v3"]["valid"] = 40;
  st.v3_verdicts[1]["tpu_inference_v3_hd64"]["valid"] = 36;
  st.v3_verdicts[1]["tpu_inference_v3_hd64"]["some_rule"] = 1;
  st.v3_pair_checks["tpu_inference_v3 bfloat16/bfloat16"] = 40;
  st.v3_worst_share["tpu_inference_v3 bfloat16/bfloat16"] = 0.25;
  st.v3_tolerance_at_worst["tpu_inference_v3 bfloat16/bfloat16"] = 1.5e-3;
  props::DialectReach jax;
  jax.calls = 12;
  jax.longest_kv_len = 131072;
  jax.most_rows = 8192;
  jax.highest_position = 131071;
  jax.items = {{"model llama", 12}, {"edge int32_window_at", 0}, {every_byte(), 3}};
  st.reach.restore("jax", jax);
  props::DialectReach v3;
  v3.calls = 1;
  v3.items = {{"model qwen", 1}};
  st.reach.restore("tpu_inference_v3", v3);
  record(st,
         {0, "validation (strict)", "line one\nline two\ttabbed \"quoted\" \\ back", "00ff", ""});
  record(st, {0, "validation (jax)", "", "", ""});
  record(st, {7, "raw call", every_byte(), "", "deadbeef"});
  record(st, {INT64_MAX, "pallas", "\xff\xfe non-UTF-8", "", ""});
  st.findings_total = 9;  // more found than kept
  st.findings_by_check["validation (strict)"] = 5;
  st.findings_by_check[every_byte()] = 4;
  st.pallas = "JAX's kernel: 3 passed, 0 failed (log \"x\"\n)";
  return st;
}

CampaignRun full_run() {
  return {.seed = std::numeric_limits<uint64_t>::max(),
          .seconds_asked = 0,
          .seconds = std::numeric_limits<double>::denorm_min() * 7,
          .workers = 6,
          .machine = "CPU \"x\" (2 cores)\n",
          .started = "2026-12-01T00:00:00Z",
          .production = true,
          .dot_passes = DotPasses::kThree,
          .cases_asked = 1000000000,
          .shard = {4095, 4096}};
}

template <class Map>
void expect_same_doubles(const Map& a, const Map& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (const auto& [key, v] : a) {
    ASSERT_TRUE(b.contains(key)) << what << " " << key;
    EXPECT_EQ(bits(v), bits(b.at(key))) << what << " " << key;
  }
}

void expect_same_stats(const Stats& a, const Stats& b) {
  EXPECT_EQ(a.max_size, b.max_size);
  EXPECT_EQ(a.cases, b.cases);
  EXPECT_EQ(a.mutated, b.mutated);
  EXPECT_EQ(a.validation_checks, b.validation_checks);
  EXPECT_EQ(a.kernel_checks, b.kernel_checks);
  EXPECT_EQ(a.raw_calls, b.raw_calls);
  EXPECT_EQ(a.raw_strict_accepted, b.raw_strict_accepted);
  EXPECT_EQ(a.raw_ran, b.raw_ran);
  EXPECT_EQ(a.verdicts[0], b.verdicts[0]);
  EXPECT_EQ(a.verdicts[1], b.verdicts[1]);
  expect_same_doubles(a.worst_budget, b.worst_budget, "worst_budget");
  expect_same_doubles(a.worst_budget_reference, b.worst_budget_reference, "worst_budget_reference");
  expect_same_doubles(a.worst_discrimination, b.worst_discrimination, "worst_discrimination");
  for (const auto weights : {&Stats::key_weights, &Stats::v3_key_weights}) {
    ASSERT_EQ((a.*weights).size(), (b.*weights).size());
    for (const auto& [key, w] : a.*weights) {
      ASSERT_TRUE((b.*weights).contains(key)) << key;
      const std::vector<double>& v = (b.*weights).at(key);
      ASSERT_EQ(w.size(), v.size()) << key;
      for (size_t i = 0; i < w.size(); ++i) EXPECT_EQ(bits(w[i]), bits(v[i])) << key << " " << i;
    }
  }
  EXPECT_EQ(a.pair_checks, b.pair_checks);
  EXPECT_EQ(a.budget_histogram, b.budget_histogram);
  EXPECT_EQ(a.biased, b.biased);
  EXPECT_EQ(a.could_not_reject_zero, b.could_not_reject_zero);
  EXPECT_EQ(a.findings_total, b.findings_total);
  EXPECT_EQ(a.findings_by_check, b.findings_by_check);
  ASSERT_EQ(a.findings.size(), b.findings.size());
  for (size_t i = 0; i < a.findings.size(); ++i) {
    EXPECT_EQ(a.findings[i].case_index, b.findings[i].case_index) << i;
    EXPECT_EQ(a.findings[i].check, b.findings[i].check) << i;
    EXPECT_EQ(a.findings[i].detail, b.findings[i].detail) << i;
    EXPECT_EQ(a.findings[i].spec, b.findings[i].spec) << i;
    EXPECT_EQ(a.findings[i].raw, b.findings[i].raw) << i;
  }
  EXPECT_EQ(a.pallas, b.pallas);
  EXPECT_EQ(a.v3_cases, b.v3_cases);
  EXPECT_EQ(a.v3_mutated, b.v3_mutated);
  EXPECT_EQ(a.v3_budget_histogram, b.v3_budget_histogram);
  EXPECT_EQ(a.v3_verdicts[0], b.v3_verdicts[0]);
  EXPECT_EQ(a.v3_verdicts[1], b.v3_verdicts[1]);
  EXPECT_EQ(a.v3_kernel_checks, b.v3_kernel_checks);
  EXPECT_EQ(a.v3_pair_checks, b.v3_pair_checks);
  expect_same_doubles(a.v3_worst_share, b.v3_worst_share, "v3_worst_share");
  expect_same_doubles(a.v3_tolerance_at_worst, b.v3_tolerance_at_worst, "v3_tolerance_at_worst");
  EXPECT_EQ(a.v3_could_not_reject_zero, b.v3_could_not_reject_zero);
  EXPECT_EQ(a.v3_past_float32_checks, b.v3_past_float32_checks);
  EXPECT_EQ(a.v3_past_float32_pairs, b.v3_past_float32_pairs);
  const auto& ra = a.reach.by_dialect();
  const auto& rb = b.reach.by_dialect();
  ASSERT_EQ(ra.size(), rb.size());
  for (const auto& [d, r] : ra) {
    ASSERT_TRUE(rb.contains(d)) << d;
    EXPECT_EQ(r.calls, rb.at(d).calls) << d;
    EXPECT_EQ(r.longest_kv_len, rb.at(d).longest_kv_len) << d;
    EXPECT_EQ(r.most_rows, rb.at(d).most_rows) << d;
    EXPECT_EQ(r.highest_position, rb.at(d).highest_position) << d;
    EXPECT_EQ(r.items, rb.at(d).items) << d;
  }
}

TEST(CampaignState, RoundTripsEveryField) {
  const Stats st = full_stats();
  const CampaignRun run = full_run();
  const std::string text = campaign_state_text(st, run);
  EXPECT_TRUE(text.starts_with("rpa-campaign-state 1\n")) << text.substr(0, 40);
  EXPECT_TRUE(text.ends_with("\nend\n"));
  const CampaignStateRead read = parse_campaign_state(text, "s.txt");
  ASSERT_TRUE(read.state) << read.error;
  expect_same_stats(st, read.state->stats);
  const CampaignRun& r = read.state->run;
  EXPECT_EQ(r.seed, run.seed);
  EXPECT_EQ(r.seconds_asked, run.seconds_asked);
  EXPECT_EQ(bits(r.seconds), bits(run.seconds));
  EXPECT_EQ(r.workers, run.workers);
  EXPECT_EQ(r.machine, run.machine);
  EXPECT_EQ(r.started, run.started);
  EXPECT_EQ(r.production, run.production);
  EXPECT_EQ(r.dot_passes, run.dot_passes);
  EXPECT_EQ(r.cases_asked, run.cases_asked);
  EXPECT_EQ(r.shard, run.shard);
  // And again: the text written from what was read is the same text.
  EXPECT_EQ(campaign_state_text(read.state->stats, r), text);
}

TEST(CampaignState, AnEmptyRunRoundTrips) {
  const CampaignRun run;
  const std::string text = campaign_state_text(Stats{}, run);
  const CampaignStateRead read = parse_campaign_state(text, "s.txt");
  ASSERT_TRUE(read.state) << read.error;
  expect_same_stats(Stats{}, read.state->stats);
  EXPECT_EQ(read.state->run.shard, (Shard{0, 1}));
}

// Every prefix of a state short of its last line's newline is an error naming the file and a
// line, one line of text; none crashes.
TEST(CampaignState, EveryTruncationIsOneLineError) {
  const std::string text = campaign_state_text(full_stats(), full_run());
  for (size_t n = 0; n + 1 < text.size(); ++n) {
    const CampaignStateRead read = parse_campaign_state(text.substr(0, n), "dir/state.txt");
    ASSERT_FALSE(read.state) << "prefix of " << n << " bytes read as a state";
    EXPECT_TRUE(read.error.starts_with("dir/state.txt: line ")) << read.error;
    EXPECT_EQ(read.error.find('\n'), std::string::npos) << read.error;
  }
  EXPECT_TRUE(parse_campaign_state(text.substr(0, text.size() - 1), "s").state);
}

TEST(CampaignState, GarbledRecordsNameTheirLine) {
  const std::string text = campaign_state_text(Stats{}, CampaignRun{});
  const auto error_of = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    t.replace(at, from.size(), to);
    const CampaignStateRead read = parse_campaign_state(t, "f");
    EXPECT_FALSE(read.state) << to;
    return read.error;
  };
  EXPECT_EQ(error_of("rpa-campaign-state 1", "rpa-campaign-state 2"),
            "f: line 1: format version 2; this rpa reads version 1");
  EXPECT_EQ(error_of("rpa-campaign-state 1", "{}"),
            "f: line 1: not an rpa campaign state (no line 'rpa-campaign-state 1')");
  EXPECT_EQ(error_of("seed 0", "seed x"), "f: line 2: seed: expected an integer, got 'x'");
  EXPECT_EQ(error_of("seed 0", "seed 0 1"), "f: line 2: seed: more values than it takes");
  EXPECT_EQ(error_of("seed 0\n", ""), "f: line 26: no 'seed' record");
  EXPECT_EQ(error_of("shard 0/1", "shard 2/2"), "f: line 8: shard: not a shard I/N: '2/2'");
  EXPECT_EQ(error_of("cases 0", "cases -1"), "f: line 13: cases: a negative count");
  EXPECT_EQ(error_of("cases 0", "bogus 0"), "f: line 13: bogus: not a record of version 1");
  EXPECT_EQ(error_of("cases 0", "mutated 0"), "f: line 14: mutated: a second record");
  EXPECT_EQ(error_of("pallas \"\"", "pallas \"\\q\""),
            "f: line 26: a bad escape in a string (\\\\, \\\" or \\xHH)");
  EXPECT_EQ(error_of("pallas \"\"", "pallas \"a"),
            "f: line 26: a string without its closing quote");
  EXPECT_EQ(error_of("end\n", "end\nmore\n"), "f: line 28: text after the line 'end'");
  EXPECT_EQ(error_of("end\n", "worst_budget \"p\" 0x1p+0\nend\n"),
            "f: line 28: worst_budget \"p\" without its worst_budget_reference or pair_checks");
  EXPECT_EQ(error_of("end\n", "pair_checks \"p\" 1\npair_checks \"p\" 2\nend\n"),
            "f: line 28: pair_checks: the key \"p\" twice");
  EXPECT_EQ(error_of("end\n", "budget_histogram \"p\" 1 2\nend\n"),
            "f: line 27: budget_histogram: missing an integer");
  EXPECT_EQ(error_of("end\n", "verdicts native \"valid\" 1\nend\n"),
            "f: line 27: verdicts: no mode 'native'");
  EXPECT_EQ(parse_campaign_state("", "f").error, "f: line 1: empty: not an rpa campaign state");
}

// Findings at the given case indices, each index's own in the order a worker records them.
Stats with_findings(const std::vector<int64_t>& indices) {
  Stats st;
  for (const int64_t i : indices) {
    record(st, {i, "validation (strict)", "first of case " + std::to_string(i), "", ""});
    record(st, {i, "validation (jax)", "second of case " + std::to_string(i), "", ""});
  }
  return st;
}

TEST(MergeInto, TheFirstFindingsByCaseIndexInEitherOrder) {
  // Two shards of 3 (i % 3 == 0 and 1), each with more findings than are kept.
  std::vector<int64_t> zero, one;
  for (int64_t i = 0; i < 90; i += 3) zero.push_back(i);
  for (int64_t i = 1; i < 90; i += 3) one.push_back(i);
  Stats a = with_findings(zero), b = with_findings(one);
  a.pallas = "JAX's kernel: 1 passed, 0 failed";
  record(a, {INT64_MAX, "pallas", "made up", "", ""});
  keep_v3_worst(a, "k", 0.5, 1e-3);
  keep_v3_worst(b, "k", 0.5, 2e-3);  // a tie: the larger tolerance, in either order
  Stats ab, ba;
  merge_into(ab, a);
  merge_into(ab, b);
  merge_into(ba, b);
  merge_into(ba, a);
  ASSERT_EQ(ab.findings.size(), kMaxFindings);
  ASSERT_EQ(ba.findings.size(), kMaxFindings);
  // Case indices 0, 1, 3, 4, 6, 7, ... two findings each, in recording order.
  const int64_t want[] = {0, 1, 3, 4, 6, 7, 9, 10, 12, 13};
  for (size_t n = 0; n < kMaxFindings; ++n) {
    EXPECT_EQ(ab.findings[n].case_index, want[n / 2]) << n;
    EXPECT_EQ(ab.findings[n].check, n % 2 == 0 ? "validation (strict)" : "validation (jax)") << n;
    EXPECT_EQ(ab.findings[n].case_index, ba.findings[n].case_index) << n;
    EXPECT_EQ(ab.findings[n].check, ba.findings[n].check) << n;
    EXPECT_EQ(ab.findings[n].detail, ba.findings[n].detail) << n;
  }
  EXPECT_EQ(ab.findings_total, 2 * 30 + 2 * 30 + 1);
  EXPECT_EQ(ab.findings_total, ba.findings_total);
  EXPECT_EQ(ab.findings_by_check, ba.findings_by_check);
  EXPECT_EQ(ab.pallas, a.pallas);
  EXPECT_EQ(ba.pallas, a.pallas);
  EXPECT_EQ(ab.v3_tolerance_at_worst.at("k"), 2e-3);
  EXPECT_EQ(ba.v3_tolerance_at_worst.at("k"), 2e-3);
}

TEST(Shard, ParsesOnlyIOverN) {
  EXPECT_EQ(parse_shard("0/1"), (Shard{0, 1}));
  EXPECT_EQ(parse_shard("4095/4096"), (Shard{4095, 4096}));
  for (const char* bad : {"3/3", "x", "1/0", "-1/2", "1/2/3", "0/4097", "", "/", "1/", "/2", " 1/2",
                          "1/2 ", "+1/2", "01/2x"}) {
    EXPECT_FALSE(parse_shard(bad)) << bad;
  }
  EXPECT_EQ((Shard{1, 3}).cases_of(240), 80);
  EXPECT_EQ((Shard{2, 3}).cases_of(241), 80);
  EXPECT_EQ((Shard{0, 3}).cases_of(241), 81);
  EXPECT_EQ((Shard{3, 4}).cases_of(2), 0);
  EXPECT_EQ((Shard{1, 3}).case_index(2), 7);
}

}  // namespace
}  // namespace rpa
