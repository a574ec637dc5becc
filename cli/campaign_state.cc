#include "cli/campaign_state.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include "casegen/random_source.h"

namespace rpa {
namespace {

constexpr std::string_view kFormat = "rpa-campaign-state";
constexpr int kVersion = 1;

// Stats' tallies by kind, each record named after its field: the writer and the reader walk
// the same tables, so a field listed here is both written and read.
struct CountField {
  const char* name;
  int64_t Stats::*member;
};
constexpr CountField kCounts[] = {
    {"cases", &Stats::cases},
    {"mutated", &Stats::mutated},
    {"validation_checks", &Stats::validation_checks},
    {"kernel_checks", &Stats::kernel_checks},
    {"raw_calls", &Stats::raw_calls},
    {"raw_strict_accepted", &Stats::raw_strict_accepted},
    {"raw_ran", &Stats::raw_ran},
    {"could_not_reject_zero", &Stats::could_not_reject_zero},
    {"findings_total", &Stats::findings_total},
    {"v3_kernel_checks", &Stats::v3_kernel_checks},
    {"v3_could_not_reject_zero", &Stats::v3_could_not_reject_zero},
    {"v3_past_float32_checks", &Stats::v3_past_float32_checks},
    {"v3_past_float32_pairs", &Stats::v3_past_float32_pairs},
};

struct TallyField {  // key -> count
  const char* name;
  std::map<std::string, int64_t> Stats::*member;
};
constexpr TallyField kTallies[] = {
    {"pair_checks", &Stats::pair_checks},
    {"biased", &Stats::biased},
    {"findings_by_check", &Stats::findings_by_check},
    {"v3_cases", &Stats::v3_cases},
    {"v3_pair_checks", &Stats::v3_pair_checks},
    {"v3_mutated", &Stats::v3_mutated},
};

struct MeasureField {  // key -> double
  const char* name;
  std::map<std::string, double> Stats::*member;
};
constexpr MeasureField kMeasures[] = {
    {"worst_budget", &Stats::worst_budget},
    {"worst_budget_reference", &Stats::worst_budget_reference},
    {"worst_discrimination", &Stats::worst_discrimination},
    {"v3_worst_share", &Stats::v3_worst_share},
    {"v3_tolerance_at_worst", &Stats::v3_tolerance_at_worst},
};

struct WeightsField {  // key -> doubles
  const char* name;
  KeyWeights Stats::*member;
};
constexpr WeightsField kWeights[] = {
    {"key_weights", &Stats::key_weights},
    {"v3_key_weights", &Stats::v3_key_weights},
};

// The run's identity: one record each, all required.
constexpr const char* kRunFields[] = {"seed",        "max_size",      "production", "dot_passes",
                                      "cases_asked", "seconds_asked", "shard",      "seconds",
                                      "workers",     "machine",       "started"};

std::string state_string(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte >= 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", byte);
      out += hex;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// %a: every bit of the double, read back exactly by strtod.
std::string exact(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

struct StateError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Token {
  std::string text;
  bool quoted = false;
};

// A line's tokens: bare ones up to the next space, quoted strings with their escapes undone.
std::vector<Token> tokens_of(std::string_view line) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < line.size()) {
    Token t;
    if (line[i] == '"') {
      t.quoted = true;
      for (++i;; ++i) {
        if (i >= line.size()) throw StateError("a string without its closing quote");
        const char c = line[i];
        if (c == '"') break;
        const auto byte = static_cast<unsigned char>(c);
        if (byte < 0x20 || byte >= 0x7f) throw StateError("a byte in a string not escaped");
        if (c != '\\') {
          t.text += c;
          continue;
        }
        if (++i >= line.size()) throw StateError("a string without its closing quote");
        if (line[i] == '\\' || line[i] == '"') {
          t.text += line[i];
          continue;
        }
        unsigned value = 0;
        const char* first = line.data() + i + 1;
        if (line[i] != 'x' || i + 3 > line.size() ||
            std::from_chars(first, first + 2, value, 16).ptr != first + 2) {
          throw StateError("a bad escape in a string (\\\\, \\\" or \\xHH)");
        }
        t.text += static_cast<char>(value);
        i += 2;
      }
      ++i;  // past the closing quote
    } else {
      const size_t end = std::min(line.find(' ', i), line.size());
      t.text = std::string(line.substr(i, end - i));
      i = end;
    }
    out.push_back(std::move(t));
    if (i == line.size()) break;
    if (line[i] != ' ' || i + 1 == line.size()) throw StateError("tokens must be one space apart");
    ++i;
  }
  return out;
}

// One record's tokens after its name, taken in order; each error names the record.
class Record {
 public:
  explicit Record(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}
  const std::string& name() const { return tokens_.front().text; }

  std::string str() {
    const Token& t = next("a quoted string");
    if (!t.quoted) fail("expected a quoted string, got '" + t.text + "'");
    return t.text;
  }
  std::string bare(const char* what) {
    const Token& t = next(what);
    if (t.quoted) fail(std::string("expected ") + what + ", got a string");
    return t.text;
  }
  template <class Int>
  Int integer() {
    const std::string t = bare("an integer");
    Int n = 0;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
    if (t.empty() || ec != std::errc() || end != t.data() + t.size()) {
      fail("expected an integer, got '" + t + "'");
    }
    return n;
  }
  int64_t count() {
    const auto n = integer<int64_t>();
    if (n < 0) fail("a negative count");
    return n;
  }
  double real() {
    const std::string t = bare("a number");
    char* end = nullptr;
    const double v = std::strtod(t.c_str(), &end);
    if (t.empty() || end != t.c_str() + t.size()) fail("expected a number, got '" + t + "'");
    return v;
  }
  size_t left() const { return tokens_.size() - at_; }
  void done() const {
    if (left() != 0) fail("more values than it takes");
  }
  [[noreturn]] void fail(const std::string& what) const { throw StateError(name() + ": " + what); }

 private:
  const Token& next(const char* what) {
    if (at_ >= tokens_.size()) fail(std::string("missing ") + what);
    return tokens_[at_++];
  }
  std::vector<Token> tokens_;
  size_t at_ = 1;
};

template <class Map>
typename Map::mapped_type& fresh_key(Record& r, Map& map, const std::string& key) {
  const auto [it, inserted] = map.try_emplace(key);
  if (!inserted) r.fail("the key " + state_string(key) + " twice");
  return it->second;
}

template <class Table>
auto find_field(const Table& table, const std::string& name) -> decltype(&table[0]) {
  for (const auto& f : table) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

int mode_index(Record& r, const Mode (&modes)[2], std::string_view (*name_of)(Mode)) {
  const std::string m = r.bare("a mode");
  for (int k = 0; k < 2; ++k) {
    if (m == name_of(modes[k])) return k;
  }
  r.fail("no mode '" + m + "'");
}

// The lookups the summary makes without a fallback (Stats' maps that go together).
void check_consistent(const Stats& st) {
  for (const auto& [pair, w] : st.worst_budget) {
    if (!st.worst_budget_reference.contains(pair) || !st.pair_checks.contains(pair)) {
      throw StateError("worst_budget " + state_string(pair) +
                       " without its worst_budget_reference or pair_checks");
    }
  }
  for (const auto& [key, w] : st.v3_worst_share) {
    if (!st.v3_tolerance_at_worst.contains(key) || !st.v3_pair_checks.contains(key)) {
      throw StateError("v3_worst_share " + state_string(key) +
                       " without its v3_tolerance_at_worst or v3_pair_checks");
    }
  }
}

// At `end`: every single record there, the reach put back, the maps consistent.
void finish(CampaignState& state, const std::set<std::string>& seen,
            std::map<std::string, props::DialectReach>& reach) {
  for (const char* field : kRunFields) {
    if (!seen.contains(field)) throw StateError(std::string("no '") + field + "' record");
  }
  for (const CountField& f : kCounts) {
    if (!seen.contains(f.name)) throw StateError(std::string("no '") + f.name + "' record");
  }
  if (!seen.contains("pallas")) throw StateError("no 'pallas' record");
  for (auto& [dialect, r] : reach) {
    if (r.calls == 0)
      throw StateError("reach_item of " + state_string(dialect) + " without its reach");
    state.stats.reach.restore(dialect, std::move(r));
  }
  check_consistent(state.stats);
}

// Reads one record into the state; returns false for `end`.
bool read_record(Record& r, CampaignState& state, std::set<std::string>& seen,
                 std::map<std::string, props::DialectReach>& reach) {
  Stats& st = state.stats;
  CampaignRun& run = state.run;
  const std::string& name = r.name();
  if (name == "end") {
    r.done();
    return false;
  }
  const bool single =
      std::find(std::begin(kRunFields), std::end(kRunFields), name) != std::end(kRunFields) ||
      find_field(kCounts, name) || name == "pallas";
  if (single && !seen.insert(name).second) r.fail("a second record");
  if (name == "seed") {
    run.seed = r.integer<uint64_t>();
  } else if (name == "max_size") {
    st.max_size = r.integer<int>();
    if (st.max_size < 0 || st.max_size > props::kFullSize) r.fail("out of range");
  } else if (name == "production") {
    const int p = r.integer<int>();
    if (p != 0 && p != 1) r.fail("takes 0 or 1");
    run.production = p == 1;
  } else if (name == "dot_passes") {
    const std::optional<DotPasses> p = parse_dot_passes(r.bare("6, 3 or 1"));
    if (!p) r.fail("takes 6, 3 or 1");
    run.dot_passes = *p;
  } else if (name == "cases_asked") {
    run.cases_asked = r.integer<uint64_t>();
  } else if (name == "seconds_asked") {
    run.seconds_asked = r.integer<uint64_t>();
  } else if (name == "shard") {
    const std::string s = r.bare("I/N");
    const std::optional<Shard> shard = parse_shard(s);
    if (!shard) r.fail("not a shard I/N: '" + s + "'");
    run.shard = *shard;
  } else if (name == "seconds") {
    run.seconds = r.real();
  } else if (name == "workers") {
    run.workers = r.integer<int>();
    if (run.workers < 1) r.fail("at least 1");
  } else if (name == "machine") {
    run.machine = r.str();
  } else if (name == "started") {
    run.started = r.str();
  } else if (name == "pallas") {
    st.pallas = r.str();
  } else if (const CountField* counted = find_field(kCounts, name)) {
    st.*(counted->member) = r.count();
  } else if (const TallyField* tally = find_field(kTallies, name)) {
    const std::string key = r.str();
    fresh_key(r, st.*(tally->member), key) = r.count();
  } else if (const MeasureField* measure = find_field(kMeasures, name)) {
    const std::string key = r.str();
    fresh_key(r, st.*(measure->member), key) = r.real();
  } else if (const WeightsField* weights = find_field(kWeights, name)) {
    const std::string key = r.str();
    std::vector<double>& w = fresh_key(r, st.*(weights->member), key);
    while (r.left() > 0) w.push_back(r.real());
  } else if (name == "verdicts") {
    const int k = mode_index(r, kModes, mode_name);
    const std::string rule = r.str();
    fresh_key(r, st.verdicts[k], rule) = r.count();
  } else if (name == "v3_verdicts") {
    const int k = mode_index(r, kV3Modes, v3_verdict_mode_name);
    const std::string dialect = r.str();
    const std::string rule = r.str();
    fresh_key(r, st.v3_verdicts[k][dialect], rule) = r.count();
  } else if (name == "budget_histogram" || name == "v3_budget_histogram") {
    const std::string key = r.str();
    BudgetHistogram& h =
        fresh_key(r, name == "budget_histogram" ? st.budget_histogram : st.v3_budget_histogram, key);
    for (int64_t& n : h) n = r.count();
  } else if (name == "reach") {
    const std::string dialect = r.str();
    props::DialectReach& d = reach[dialect];
    if (d.calls > 0) r.fail("the dialect " + state_string(dialect) + " twice");
    d.calls = r.count();
    d.longest_kv_len = r.count();
    d.most_rows = r.count();
    d.highest_position = r.count();
    if (d.calls == 0) r.fail("a dialect without calls");
  } else if (name == "reach_item") {
    const std::string dialect = r.str();
    const std::string item = r.str();
    fresh_key(r, reach[dialect].items, item) = r.count();
  } else if (name == "finding") {
    Finding f;
    f.case_index = r.integer<int64_t>();
    f.check = r.str();
    f.detail = r.str();
    f.spec = r.str();
    f.raw = r.str();
    if (st.findings.size() >= kMaxFindings) r.fail("more than " + std::to_string(kMaxFindings));
    st.findings.push_back(std::move(f));
  } else {
    r.fail("not a record of version " + std::to_string(kVersion));
  }
  r.done();
  return true;
}

}  // namespace

std::string campaign_state_text(const Stats& st, const CampaignRun& run) {
  std::string s = std::string(kFormat) + " " + std::to_string(kVersion) + "\n";
  auto line = [&s](const std::string& name, const std::string& rest) {
    s += name + " " + rest + "\n";
  };
  line("seed", std::to_string(run.seed));
  line("max_size", std::to_string(st.max_size));
  line("production", run.production ? "1" : "0");
  line("dot_passes", std::to_string(dot_pass_count(run.dot_passes)));
  line("cases_asked", std::to_string(run.cases_asked));
  line("seconds_asked", std::to_string(run.seconds_asked));
  line("shard", shard_text(run.shard));
  line("seconds", exact(run.seconds));
  line("workers", std::to_string(run.workers));
  line("machine", state_string(run.machine));
  line("started", state_string(run.started));
  for (const CountField& f : kCounts) line(f.name, std::to_string(st.*(f.member)));
  line("pallas", state_string(st.pallas));
  for (int k = 0; k < 2; ++k) {
    for (const auto& [rule, n] : st.verdicts[k]) {
      line("verdicts",
           std::string(mode_name(kModes[k])) + " " + state_string(rule) + " " + std::to_string(n));
    }
  }
  for (int k = 0; k < 2; ++k) {
    for (const auto& [dialect, rules] : st.v3_verdicts[k]) {
      for (const auto& [rule, n] : rules) {
        line("v3_verdicts", std::string(v3_verdict_mode_name(kV3Modes[k])) + " " +
                                state_string(dialect) + " " + state_string(rule) + " " +
                                std::to_string(n));
      }
    }
  }
  for (const TallyField& f : kTallies) {
    for (const auto& [key, n] : st.*(f.member))
      line(f.name, state_string(key) + " " + std::to_string(n));
  }
  for (const MeasureField& f : kMeasures) {
    for (const auto& [key, v] : st.*(f.member)) line(f.name, state_string(key) + " " + exact(v));
  }
  for (const WeightsField& f : kWeights) {
    for (const auto& [key, w] : st.*(f.member)) {
      std::string rest = state_string(key);
      for (const double v : w) {
        rest += ' ';  // appended, not " " + ...: GCC 12 -O3 reports a false -Wrestrict on that
        rest += exact(v);
      }
      line(f.name, rest);
    }
  }
  for (const auto& [name, histograms] : {std::pair{"budget_histogram", &st.budget_histogram},
                                          std::pair{"v3_budget_histogram", &st.v3_budget_histogram}}) {
    for (const auto& [key, h] : *histograms) {
      std::string rest = state_string(key);
      for (const int64_t n : h) {
        rest += ' ';
        rest += std::to_string(n);
      }
      line(name, rest);
    }
  }
  for (const auto& [dialect, r] : st.reach.by_dialect()) {
    line("reach", state_string(dialect) + " " + std::to_string(r.calls) + " " +
                      std::to_string(r.longest_kv_len) + " " + std::to_string(r.most_rows) + " " +
                      std::to_string(r.highest_position));
    for (const auto& [item, n] : r.items) {
      line("reach_item",
           state_string(dialect) + " " + state_string(item) + " " + std::to_string(n));
    }
  }
  for (const Finding& f : st.findings) {
    line("finding", std::to_string(f.case_index) + " " + state_string(f.check) + " " +
                        state_string(f.detail) + " " + state_string(f.spec) + " " +
                        state_string(f.raw));
  }
  return s + "end\n";
}

CampaignStateRead parse_campaign_state(std::string_view text, const std::string& name) {
  CampaignState state;
  size_t line_no = 0;
  try {
    std::set<std::string> seen;
    std::map<std::string, props::DialectReach> reach;
    bool ended = false;
    size_t at = 0;
    while (at < text.size()) {
      const size_t newline = std::min(text.find('\n', at), text.size());
      const std::string_view line = text.substr(at, newline - at);
      at = newline + 1;
      ++line_no;
      if (ended) throw StateError("text after the line 'end'");
      if (line_no == 1) {
        const std::string want = std::string(kFormat) + " " + std::to_string(kVersion);
        if (line.starts_with(std::string(kFormat) + " ") && line != want) {
          throw StateError("format version " + std::string(line.substr(kFormat.size() + 1)) +
                           "; this rpa reads version " + std::to_string(kVersion));
        }
        if (line != want) throw StateError("not an rpa campaign state (no line '" + want + "')");
        continue;
      }
      std::vector<Token> tokens = tokens_of(line);
      if (tokens.empty() || tokens.front().quoted) throw StateError("no record name");
      Record r(std::move(tokens));
      if (!read_record(r, state, seen, reach)) {
        ended = true;
        finish(state, seen, reach);
      }
    }
    if (!ended) {
      ++line_no;
      throw StateError(line_no == 1 ? "empty: not an rpa campaign state"
                                    : "cut short: no line 'end'");
    }
  } catch (const StateError& e) {
    return {std::nullopt, name + ": line " + std::to_string(line_no) + ": " + e.what()};
  }
  return {std::move(state), ""};
}

CampaignStateRead read_campaign_state(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    return {std::nullopt, file.string() + ": cannot be read (no rpa campaign --report there?)"};
  }
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) return {std::nullopt, file.string() + ": cannot be read"};
  return parse_campaign_state(text, file.string());
}

}  // namespace rpa
