#include "bench/fuzz_inputs.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "harness/target_inputs.h"
#include "harness/targets.h"

namespace rpa::bench {
namespace {

using Input = std::vector<uint8_t>;

struct InputSet {
  const fuzz::Target* target = nullptr;
  std::vector<Input> inputs;
};

std::string input_class(const Input& bytes) {
  const std::span<const uint8_t> s(bytes);
  if (fuzz::production_payload(s)) return "production";
  if (fuzz::v3_payload(s)) return "v3";
  return "jax";
}

void bm_fuzz_inputs(benchmark::State& state, const InputSet* set) {
  for (auto _ : state) {
    for (const Input& in : set->inputs) set->target->body(in.data(), in.size());
  }
  const auto n = static_cast<double>(set->inputs.size());
  state.counters["inputs/s"] = benchmark::Counter(n, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["time/input"] = benchmark::Counter(
      n, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.SetLabel(std::to_string(set->inputs.size()) + " inputs");
}

}  // namespace

int register_fuzz_input_benchmarks(const std::string& corpus_root) {
  // Owned for the process: Google Benchmark keeps the pointers until it has run.
  static std::vector<std::unique_ptr<InputSet>> sets;
  int registered = 0;
  for (const fuzz::Target& target : fuzz::kTargets) {
    const std::filesystem::path dir =
        std::filesystem::path(corpus_root) / "fuzz" / std::string(target.name);
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) continue;
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    auto all = std::make_unique<InputSet>(InputSet{&target, {}});
    std::map<std::string, std::unique_ptr<InputSet>> by_class;
    for (const auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      Input bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      auto& cls = by_class[input_class(bytes)];
      if (!cls) cls = std::make_unique<InputSet>(InputSet{&target, {}});
      cls->inputs.push_back(bytes);
      all->inputs.push_back(std::move(bytes));
    }
    if (all->inputs.empty()) continue;
    const std::string name = "fuzz_input/" + std::string(target.name);
    benchmark::RegisterBenchmark(name.c_str(), bm_fuzz_inputs, all.get())
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    sets.push_back(std::move(all));
    ++registered;
    // The classes only where the target's corpus holds more than one.
    if (by_class.size() < 2) continue;
    for (auto& [cls, set] : by_class) {
      const std::string cname = name + "/" + cls;
      benchmark::RegisterBenchmark(cname.c_str(), bm_fuzz_inputs, set.get())
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
      sets.push_back(std::move(set));
      ++registered;
    }
  }
  return registered;
}

}  // namespace rpa::bench
