// Production-size calls through every implementation (issue 33; docs/properties.md, "The
// production profile"): fixed calls of the production profile (casegen/production.h), each
// built, validated, and run through the dense reference, the tiled kernel and the literal
// schedule (JAX's Pallas program; tpu-inference v3's on TPU v5, v6 and v7), every stage timed
// once and every output checked against the reference at the properties' tolerance (each
// dialect family's stages: harness/jax_production_bench.h, harness/v3_production_bench.h,
// reached through harness/input_families.h). What it measures is whether a serving-size call
// costs seconds or minutes on this machine, which sets the profile's bounds
// (kProductionMemoryBytes, kProductionMacs).
//
// Shared by `rpa bench --preset production` (cli/bench_production.cc) and the Google
// Benchmark binary (bench/rpa_bench.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dialect.h"

namespace rpa::bench {

// One fixed call: `rpa gen --profile production --dialect D --seed S`.
struct ProductionBenchCall {
  std::string_view name;  // "jax-long", "v3-serving", ...
  Dialect dialect;
  uint64_t seed;
  std::string_view why;   // what makes it a worst case
};

// Per dialect: the longest context (a 128K-token sequence), the fullest serving batch (512
// slots at the MAC bound), and for kernel.py the int16-positions edge (32752 tokens).
std::span<const ProductionBenchCall> production_bench_calls();

// A stage's wall time; for the kernels, whether the output agreed with the reference.
struct ProductionStage {
  std::string name;      // "materialize", "validate", "reference", "tiled", "literal v6", ...
  double seconds = 0.0;
  bool checked = false;  // compared against the reference
  bool agree = true;
  std::string mismatch;  // the first mismatch, where it did not agree
};

struct ProductionTiming {
  ProductionBenchCall call;
  std::string spec;         // prod:HEX
  std::string description;  // casegen/production.h describe()
  int64_t num_seqs = 0, rows = 0, max_kv_len = 0, macs = 0, memory_bytes = 0;
  std::vector<ProductionStage> stages;
  bool agree() const;
  double total_seconds() const;
};

// Builds the call and runs every stage once; the tiled kernel on `threads` threads (0: every
// core). `progress`, if set, is called before each stage with its name. Throws
// std::logic_error if validation rejects the call (the generator's bug, never expected).
ProductionTiming time_production_call(const ProductionBenchCall& call, int threads,
                                      const std::function<void(std::string_view)>& progress = {});

}  // namespace rpa::bench
