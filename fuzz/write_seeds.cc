// rpa_fuzz_seeds: writes, or checks, the seed corpora of the targets that decode bytes with
// ByteSource (fuzz_validate, fuzz_differential, fuzz_raw_inputs) under corpus/fuzz/.
//
//   rpa_fuzz_seeds write CORPUS_DIR   (re)writes every seed file
//   rpa_fuzz_seeds check CORPUS_DIR   every seed is present with the bytes it would write,
//                                     every input of the three corpora round-trips through
//                                     its decoder and encoder, and the fuzz_validate corpus
//                                     reaches every rule in every mode, every mutation and
//                                     every value class of the edge parameters
//
// Seeds are generated cases encoded with the targets' own decoders (target_inputs.h,
// jax_raw_call.h): valid cases, every named mutation in each of its variants, and JAX's test
// scenarios in small form. Files found there that this tool does not write (regressions,
// inputs fuzz/run.sh merged in) are left alone and checked with the rest. Each dialect family
// adds its part (fuzz/seed_family.h: fuzz/jax_seeds.cc, fuzz/v3_seeds.cc); this file holds what
// every family shares: the empty seed, the production calls of every dialect, the files and
// the checks.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/dialect.h"
#include "casegen/generate.h"
#include "casegen/production.h"
#include "fuzz/seed_family.h"
#include "harness/target_inputs.h"

namespace rpa::fuzz {
namespace {

std::vector<const SeedFamily*>& registered() {
  static std::vector<const SeedFamily*> families;
  return families;
}

}  // namespace

std::vector<const SeedFamily*> seed_families() {
  std::vector<const SeedFamily*> out;
  for (const SeedFamily* f : registered()) {
    if (f->claims) out.push_back(f);
  }
  for (const SeedFamily* f : registered()) {
    if (!f->claims) out.push_back(f);
  }
  return out;
}

RegisterSeedFamily::RegisterSeedFamily(const SeedFamily& f) { registered().push_back(&f); }

void round_trip_failed(const std::string& name) {
  std::fprintf(stderr, "rpa_fuzz_seeds: seed %s does not decode to its case\n", name.c_str());
  std::exit(1);
}

}  // namespace rpa::fuzz

namespace {

using namespace rpa;
using fuzz::Seeds;
namespace fs = std::filesystem;

// The family an input (not a production call) belongs to: the first tagged one that claims
// it, else the untagged one.
const fuzz::SeedFamily& family_of(std::span<const uint8_t> bytes) {
  for (const fuzz::SeedFamily* f : fuzz::seed_families()) {
    if (!f->claims || f->claims(bytes)) return *f;
  }
  throw std::logic_error("no untagged seed family is registered");
}

// The family that owns the dialect's production calls.
const fuzz::SeedFamily& family_of(Dialect d) {
  for (const fuzz::SeedFamily* f : fuzz::seed_families()) {
    if (f->owns(d)) return *f;
  }
  throw std::logic_error("no seed family owns dialect " + std::string(dialect_name(d)));
}

Seeds validate_seeds() {
  Seeds seeds;
  seeds["empty"] = {};
  for (const fuzz::SeedFamily* f : fuzz::seed_families()) f->validate_seeds(seeds);
  // Production calls (tagged): per dialect, the first two recipes of at most 16 MiB, the first
  // of at most 64 MiB at each integer edge the dialect has, and the first small one with its
  // first mutation and with two (a jax pair of groups, a v3 pair that composes).
  for (Dialect d : kDialects) {
    const std::string prefix = "prod-" + std::string(dialect_name(d)) + "-";
    const fuzz::SeedFamily& family = family_of(d);
    auto add_production = [&](const std::string& name, int mutations,
                              const props::ProductionSpec& spec) {
      seeds[name] = family.production_seed(spec, mutations, name);
    };
    std::set<props::ProductionEdge> edges;
    int small = 0;
    for (uint64_t seed = 0; seed < 3000; ++seed) {
      const props::ProductionSpec spec = props::seeded_production_spec(seed, d);
      const int64_t bytes = spec.memory_bytes();
      std::string tail = std::to_string(seed);
      tail.insert(tail.begin(), '-');
      if (spec.edge != props::ProductionEdge::kNone && bytes <= (int64_t{64} << 20) &&
          edges.insert(spec.edge).second) {
        add_production(prefix + std::string(props::production_edge_name(spec.edge)) + tail, 0, spec);
      }
      if (small >= 2 || bytes > (int64_t{16} << 20)) continue;
      add_production(prefix + "valid" + tail, 0, spec);
      if (small++ > 0) continue;
      add_production(prefix + "mutated" + tail, 1, spec);
      add_production(prefix + "pair" + tail, 2, spec);
    }
  }
  return seeds;
}

Seeds differential_seeds() {
  Seeds seeds;
  seeds["empty"] = {};
  for (const fuzz::SeedFamily* f : fuzz::seed_families()) f->differential_seeds(seeds);
  return seeds;
}

Seeds raw_seeds() {
  Seeds seeds;
  seeds["empty"] = {};
  for (const fuzz::SeedFamily* f : fuzz::seed_families()) f->raw_seeds(seeds);
  return seeds;
}

// decode(encode(decode(x))) == decode(x): what a target's decoder builds from any bytes, its
// encoder writes as bytes that decode to the same thing.
bool validate_round_trips(const std::vector<uint8_t>& bytes) {
  if (const auto production = fuzz::production_payload(bytes)) {
    return family_of(fuzz::production_dialect(*production)).production_round_trips(*production);
  }
  return family_of(bytes).validate_round_trips(bytes);
}

bool differential_round_trips(const std::vector<uint8_t>& bytes) {
  return family_of(bytes).differential_round_trips(bytes);
}

bool raw_round_trips(const std::vector<uint8_t>& bytes) {
  return family_of(bytes).raw_round_trips(bytes);
}

struct Target {
  const char* name;
  Seeds (*seeds)();
  bool (*round_trips)(const std::vector<uint8_t>&);
};

const Target kTargets[] = {
    {"fuzz_validate", validate_seeds, validate_round_trips},
    {"fuzz_differential", differential_seeds, differential_round_trips},
    {"fuzz_raw_inputs", raw_seeds, raw_round_trips},
};

std::vector<uint8_t> read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

int check(const fs::path& corpus) {
  int passed = 0, failed = 0;
  auto verdict = [&](bool ok, const std::string& what) {
    ++(ok ? passed : failed);
    if (!ok) std::printf("FAIL %s\n", what.c_str());
  };
  for (const Target& t : kTargets) {
    const fs::path dir = corpus / "fuzz" / t.name;
    int stale = 0;
    for (const auto& [name, bytes] : t.seeds()) {
      std::error_code ec;
      if (!fs::exists(dir / name, ec) || read_file(dir / name) != bytes) {
        ++stale;
        std::printf("  %s/%s: missing or different\n", t.name, name.c_str());
      }
    }
    verdict(stale == 0, std::string(t.name) + ": " + std::to_string(stale) +
                            " seeds missing or stale; run rpa_fuzz_seeds write corpus");
  }

  // The jax seeds never start with the v3 tag (target_inputs.h), so they decode as jax
  // inputs, as every input did before the v3 dialects came.
  for (const Target& t : kTargets) {
    int tagged = 0;
    for (const auto& [name, bytes] : t.seeds()) {
      const bool v3 = name.rfind("v3-", 0) == 0, production = name.rfind("prod-", 0) == 0;
      if ((!v3 && fuzz::v3_payload(bytes)) || (!production && fuzz::production_payload(bytes))) {
        ++tagged;
        std::printf("  %s/%s: starts with another dialect's tag\n", t.name, name.c_str());
      }
    }
    verdict(tagged == 0, std::string(t.name) + ": " + std::to_string(tagged) +
                             " seeds start with another part's tag (v3, production)");
  }

  // Codec symmetry on every input there (seeds, regressions, merged inputs).
  for (const Target& t : kTargets) {
    int asymmetric = 0, inputs = 0;
    for (const auto& entry : fs::directory_iterator(corpus / "fuzz" / t.name)) {
      ++inputs;
      if (!t.round_trips(read_file(entry.path()))) {
        ++asymmetric;
        std::printf("  %s: decode(encode(decode(x))) differs, or (v3) its mutations do not "
                    "compose\n",
                    entry.path().c_str());
      }
    }
    verdict(asymmetric == 0, std::string(t.name) + ": " + std::to_string(asymmetric) + " of " +
                                 std::to_string(inputs) + " inputs do not round-trip");
  }

  // What the fuzz_validate corpus reaches, decoded as the target decodes it.
  std::set<Dialect> production_dialects;
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(corpus / "fuzz" / "fuzz_validate")) {
    ++files;
    const std::vector<uint8_t> bytes = read_file(entry.path());
    if (const auto production = fuzz::production_payload(bytes)) {
      production_dialects.insert(fuzz::production_dialect(*production));
      continue;
    }
    family_of(bytes).reach(bytes);
  }
  for (Dialect d : kDialects) {
    verdict(production_dialects.contains(d), "fuzz_validate corpus: no production call of " +
                                                 std::string(dialect_name(d)));
  }
  size_t classes = 0;
  for (const fuzz::SeedFamily* f : fuzz::seed_families()) {
    f->reached(verdict);
    if (f->value_classes) classes += f->value_classes();
  }
  std::printf("rpa_fuzz_seeds: %zu fuzz_validate inputs, %zu value classes\n", files, classes);
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}

int write(const fs::path& corpus) {
  for (const Target& t : kTargets) {
    const fs::path dir = corpus / "fuzz" / t.name;
    fs::create_directories(dir);
    const Seeds seeds = t.seeds();
    for (const auto& [name, bytes] : seeds) {
      std::ofstream out(dir / name, std::ios::binary);
      out.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
      if (!out) {
        std::fprintf(stderr, "rpa_fuzz_seeds: cannot write %s\n", (dir / name).c_str());
        return 1;
      }
    }
    std::printf("%s: %zu seeds\n", t.name, seeds.size());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage = "usage: rpa_fuzz_seeds write|check CORPUS_DIR\n";
  if (argc != 3) {
    std::fputs(usage.c_str(), stderr);
    return 64;
  }
  const std::string cmd = argv[1];
  if (cmd == "write") return write(argv[2]);
  if (cmd == "check") return check(argv[2]);
  std::fputs(usage.c_str(), stderr);
  return 64;
}
