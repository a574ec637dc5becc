// The fuzzers' per-input cost on a fixed input set (issue 35): each target's body
// (harness/targets.h) run in-process over the files of corpus/fuzz/<target>/, sorted, as
// Google Benchmarks named fuzz_input/<target>[/<class>]; the class is the input's dialect
// tag (jax, v3, production) where the target reads one. One iteration runs the whole set; the
// counters are inputs/s and time/input (seconds). This is the release build's cost, without the
// sanitizers and coverage of a fuzzing build (fuzz/run.sh prints that build's exec/s), so a
// slowdown of the work per input shows as a number here and not as a timed test.
#pragma once

#include <string>

namespace rpa::bench {

// Registers the benchmarks over corpus_root/fuzz/<target>/ (a missing directory registers
// nothing for that target); returns how many were registered.
int register_fuzz_input_benchmarks(const std::string& corpus_root);

}  // namespace rpa::bench
