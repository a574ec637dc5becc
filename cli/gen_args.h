// rpa gen's arguments as each dialect's part of the command reads them (cli/dialect_commands.h:
// gen), and what every part prints after its case: the path features.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "casefile/case.h"
#include "casegen/generate.h"
#include "validation/target_profile.h"

namespace rpa {

struct GenArgs {
  std::optional<uint64_t> seed;  // --seed; without it, --spec (exactly one of the two is given)
  std::optional<int> size;       // --size
  std::string spec_text;         // --spec
  props::GenRequest request;     // --profile and --head-dim
  std::string output;            // -o
  std::optional<TargetProfile> features;  // --features (on --target)
};

// --features: the path features of the call's program on the target (service/path_features.h),
// one "  feature NAME COUNT" line each, after the case.
void print_features(const Case& c, const std::optional<TargetProfile>& features);

}  // namespace rpa
