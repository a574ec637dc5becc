// One dialect family's part of the seed writer (write_seeds.cc, rpa_fuzz_seeds): the seeds it
// adds to each byte-decoding target's corpus, how an input of its format round-trips, its
// production calls' mutated seeds, and what the fuzz_validate corpus must reach of it. Each
// family registers its part from its own file (fuzz/jax_seeds.cc, fuzz/v3_seeds.cc) by static
// registration (RegisterSeedFamily); the writer runs the tagged families first and the
// untagged one last, as harness/input_families.h orders them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/dialect.h"
#include "casegen/production.h"

namespace rpa::fuzz {

using Seeds = std::map<std::string, std::vector<uint8_t>>;  // file name -> bytes

// A check's outcome: ok, or the line its failure prints.
using Verdict = std::function<void(bool ok, const std::string& what)>;

struct SeedFamily {
  // Whether an input (whole, not a production call) is the family's, by its tag; nullptr for
  // the untagged family (at most one), whose inputs are those no tagged family claims.
  bool (*claims)(std::span<const uint8_t> bytes) = nullptr;
  // The family's seeds of fuzz_validate (its production calls aside), fuzz_differential and
  // fuzz_raw_inputs, each checked to decode to what it was written from.
  void (*validate_seeds)(Seeds& seeds) = nullptr;
  void (*differential_seeds)(Seeds& seeds) = nullptr;
  void (*raw_seeds)(Seeds& seeds) = nullptr;
  // decode(encode(decode(x))) == decode(x) for an input of the family, per target (and, v3,
  // the decoder gives only mutation lists the spec model takes).
  bool (*validate_round_trips)(const std::vector<uint8_t>& bytes) = nullptr;
  bool (*differential_round_trips)(const std::vector<uint8_t>& bytes) = nullptr;
  bool (*raw_round_trips)(const std::vector<uint8_t>& bytes) = nullptr;
  // Whether the family owns production calls of dialect d.
  bool (*owns)(Dialect d) = nullptr;
  // A production call's seed (with the tag) and its first `mutations` (0, 1 or 2) named
  // mutations as the family picks them; exits through round_trip_failed(name) unless it
  // decodes to what it was written from.
  std::vector<uint8_t> (*production_seed)(const props::ProductionSpec& spec, int mutations,
                                          const std::string& name) = nullptr;
  // The round trip of a production payload (the bytes after the tag) of a dialect it owns.
  bool (*production_round_trips)(std::span<const uint8_t> payload) = nullptr;
  // What the fuzz_validate corpus reaches: each input of the family in turn, then the
  // verdicts on what it must reach, and the value classes reached (0: none kept).
  void (*reach)(const std::vector<uint8_t>& bytes) = nullptr;
  void (*reached)(const Verdict& verdict) = nullptr;
  size_t (*value_classes)() = nullptr;
};

// The registered families: the tagged ones first, the untagged one last.
std::vector<const SeedFamily*> seed_families();

struct RegisterSeedFamily {
  explicit RegisterSeedFamily(const SeedFamily& f);
};

// A seed that does not decode to what it was written from is a bug in the seed writer (a
// scenario no source could draw) or in the decoder: says which and exits.
[[noreturn]] void round_trip_failed(const std::string& name);

}  // namespace rpa::fuzz
