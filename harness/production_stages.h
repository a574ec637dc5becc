// What each dialect's production timing (harness/jax_production_bench.cc,
// harness/v3_production_bench.cc) shares: a stage run and timed, a kernel's output recorded as
// checked.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harness/production_bench.h"

namespace rpa::bench {

using Clock = std::chrono::steady_clock;

// Runs f, appends a stage with its wall time, and returns what f returned.
template <class F>
auto timed(std::vector<ProductionStage>& stages, std::string name,
           const std::function<void(std::string_view)>& progress, F&& f) {
  if (progress) progress(name);
  const Clock::time_point t0 = Clock::now();
  auto result = f();
  ProductionStage stage;
  stage.name = std::move(name);
  stage.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  stages.push_back(std::move(stage));
  return result;
}

// Marks a kernel's stage as checked against the reference, with the mismatch where it did
// not agree.
inline void record(ProductionStage& stage, bool agree, std::string mismatch) {
  stage.checked = true;
  stage.agree = agree;
  if (!agree) stage.mismatch = std::move(mismatch);
}

}  // namespace rpa::bench
