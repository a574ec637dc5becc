// rpa merge DIR... -o OUT [--junit FILE]: the shards of one campaign (rpa campaign --shard I/N
// --report DIR, one job of a job array each) into the report one unsharded run of the same
// cases writes: each DIR's campaign-state.txt is read, checked to be a shard of the same
// campaign, merged (cli/campaign_stats.h's merge_into, as the workers of one run are) and
// reported through report_campaign, as rpa campaign reports.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli/campaign_run.h"
#include "cli/campaign_state.h"
#include "cli/campaign_stats.h"
#include "cli/campaign_summary.h"
#include "cli/cli_args.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"

namespace rpa {
namespace {

struct ShardState {
  std::string dir;  // as given
  CampaignState state;
};

// What makes runs shards of one campaign, each in words: the case indices, what each case is
// (seed, sizes, profile) and how it is checked (dot passes) must agree.
struct Identity {
  const char* field;
  std::function<std::string(const CampaignState&)> words;
};

const std::vector<Identity>& identity() {
  static const std::vector<Identity> fields = {
      {"seed", [](const CampaignState& s) { return "seed " + std::to_string(s.run.seed); }},
      {"max_size",
       [](const CampaignState& s) { return "sizes 0.." + std::to_string(s.stats.max_size); }},
      {"profile",
       [](const CampaignState& s) {
         return std::string(s.run.production ? "--profile production" : "the default profile");
       }},
      {"dot_passes",
       [](const CampaignState& s) {
         return "--dot-passes " + std::to_string(dot_pass_count(s.run.dot_passes));
       }},
      {"cases_asked",
       [](const CampaignState& s) {
         return s.run.cases_asked > 0 ? "--cases " + std::to_string(s.run.cases_asked)
                                      : std::string("a timed run (no --cases)");
       }},
      {"shards",
       [](const CampaignState& s) { return std::to_string(s.run.shard.count) + " shards"; }},
  };
  return fields;
}

// "0/3", "0/3 and 2/3", "0/4, 1/4 and 3/4".
std::string listed(const std::vector<int64_t>& indices, int64_t count) {
  std::string s;
  for (size_t k = 0; k < indices.size(); ++k) {
    s += (k == 0 ? "" : k + 1 == indices.size() ? " and " : ", ") + shard_text({indices[k], count});
  }
  return s;
}

// "" when the states are every shard of one campaign, once each; else the one-line reason.
std::string shard_problem(const std::vector<ShardState>& shards) {
  const ShardState& first = shards.front();
  for (const ShardState& s : shards) {
    for (const Identity& f : identity()) {
      const std::string mine = f.words(s.state), theirs = f.words(first.state);
      if (mine != theirs) {
        return s.dir + " is shard " + shard_text(s.state.run.shard) + " of " + mine + ", " +
               first.dir + " is of " + theirs;
      }
    }
  }
  const int64_t count = first.state.run.shard.count;
  std::map<int64_t, const ShardState*> by_index;
  for (const ShardState& s : shards) {
    const auto [it, fresh] = by_index.emplace(s.state.run.shard.index, &s);
    if (!fresh) {
      return it->second->dir + " and " + s.dir + " are both shard " + shard_text(s.state.run.shard);
    }
  }
  std::vector<int64_t> given, missing;
  for (int64_t i = 0; i < count; ++i) (by_index.contains(i) ? given : missing).push_back(i);
  if (missing.empty()) return "";
  return "shard" + std::string(given.size() == 1 ? " " : "s ") + listed(given, count) + " given; " +
         listed(missing, count) + (missing.size() == 1 ? " is" : " are") + " missing";
}

// The merged run as one run of the same cases: shard 0/1, so that merges nest. It took as
// long as its longest shard (the wall clock of a job array whose jobs ran side by side) on
// the shards' workers together.
CampaignRun merged_run(const std::vector<ShardState>& shards) {
  CampaignRun run = shards.front().state.run;
  run.shard = Shard{};
  run.workers = 0;
  std::set<std::string> machines;
  for (const ShardState& s : shards) {
    const CampaignRun& r = s.state.run;
    run.seconds = std::max(run.seconds, r.seconds);
    run.seconds_asked = std::max(run.seconds_asked, r.seconds_asked);
    run.workers += r.workers;
    run.started = std::min(run.started, r.started);
    machines.insert(r.machine);
  }
  run.machine.clear();
  for (const std::string& m : machines) run.machine += (run.machine.empty() ? "" : "; ") + m;
  return run;
}

}  // namespace

int merge_command(const std::vector<std::string_view>& args) {
  std::vector<std::string> dirs;
  std::optional<std::string> out, junit;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (a == "-o" || a == "--junit") {
      if (i + 1 >= args.size() || args[i + 1].empty()) {
        return usage_error(std::string(a) + (a == "-o" ? " needs a directory" : " needs a file"));
      }
      (a == "-o" ? out : junit) = std::string(args[++i]);
    } else if (a.starts_with("-") && a != "-") {
      return usage_error("unknown option " + std::string(a));
    } else {
      dirs.emplace_back(a);
    }
  }
  if (dirs.empty()) return usage_error("merge needs the shards' report directories");
  if (!out) return usage_error("merge needs -o OUT, the directory of the merged report");

  std::vector<ShardState> shards;
  for (const std::string& dir : dirs) {
    CampaignStateRead read = read_campaign_state(std::filesystem::path(dir) / kCampaignStateFile);
    if (!read.state) {
      std::fprintf(stderr, "rpa merge: %s\n", read.error.c_str());
      return kExitUnreadable;
    }
    shards.push_back({dir, std::move(*read.state)});
  }
  if (const std::string problem = shard_problem(shards); !problem.empty()) {
    std::fprintf(stderr, "rpa merge: %s\n", problem.c_str());
    return kExitRejected;
  }
  if (!report_dir_writable(*out)) {
    std::fprintf(stderr, "rpa merge: cannot write the report to %s\n", out->c_str());
    return kExitUnreadable;
  }
  // In the order given: merge_into's result does not depend on it.
  Stats st;
  st.max_size = shards.front().state.stats.max_size;
  for (const ShardState& s : shards) merge_into(st, s.state.stats);
  const CampaignRun run = merged_run(shards);
  std::fprintf(stderr, "rpa merge: %zu shard%s of seed %llu merged into %s\n", shards.size(),
               shards.size() == 1 ? "" : "s", static_cast<unsigned long long>(run.seed),
               out->c_str());
  return report_campaign(st, run, out, junit);
}

}  // namespace rpa
