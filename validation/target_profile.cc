#include "validation/target_profile.h"

#include <algorithm>
#include <array>

namespace rpa {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * kKiB;

constexpr std::array<TargetProfile, 8> kProfiles = {{
    {"v2", 16 * kMiB, 16 * kKiB},
    {"v3", 16 * kMiB, 16 * kKiB},
    {"v4", 16 * kMiB, 1 * kMiB},
    {"v4i", 16 * kMiB, 1 * kMiB},
    {"v5e", 128 * kMiB, 1 * kMiB},
    {"v5p", 64 * kMiB, 1 * kMiB},
    {"v6e", 128 * kMiB, 1 * kMiB},
    {"7x", 64 * kMiB, 1 * kMiB},
}};

}  // namespace

std::span<const TargetProfile> target_profiles() { return kProfiles; }

std::optional<TargetProfile> find_target_profile(std::string_view name) {
  for (const TargetProfile& p : kProfiles) {
    if (p.name == name) return p;
  }
  return std::nullopt;
}

int tpu_generation(const TargetProfile& target) {
  const std::string_view n = target.name;
  return n.empty() ? -1 : (n[0] == 'v' ? n[1] : n[0]) - '0';
}

const TargetProfile& default_target_profile() { return kProfiles[6]; }

int64_t default_scoped_vmem_limit(const TargetProfile& target) {
  return std::min<int64_t>(32 * kMiB, target.vmem_capacity_bytes);
}

}  // namespace rpa
