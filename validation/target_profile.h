// TPU generations and their per-core scratch memories (from jax/_src/tpu_info.py).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace rpa {

struct TargetProfile {
  std::string_view name;  // "v2", "v3", "v4", "v4i", "v5e", "v5p", "v6e", "7x"
  int64_t vmem_capacity_bytes;
  int64_t smem_capacity_bytes;
};

// Every known profile, oldest first.
std::span<const TargetProfile> target_profiles();
std::optional<TargetProfile> find_target_profile(std::string_view name);
// The generation number get_tpu_version() returns on it: 2 ("v2") to 7 ("7x").
int tpu_generation(const TargetProfile& target);
// v6e: the generation vLLM-TPU serves on today.
const TargetProfile& default_target_profile();

// The scoped VMEM limit when vmem_limit_bytes is None: 32 MiB, or all of VMEM on the
// generations that have less.
int64_t default_scoped_vmem_limit(const TargetProfile& target);

}  // namespace rpa
