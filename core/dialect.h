// A dialect is one kernel family's calling convention (DESIGN.md section 16): which arrays a
// call takes, how its KV cache is laid out, and whose validators its native mode reproduces.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace rpa {

enum class Dialect : uint8_t {
  kJax,                 // JAX 0.10.2's ragged_paged_attention (section 2)
  kTpuInferenceV3,      // tpu-inference 0.32.0 v3/kernel.py: packed K/V interleaved cache
  kTpuInferenceV3Hd64,  // tpu-inference 0.32.0 v3/kernel_hd64.py: head_dim 64, [K|V], sinks
};

// Every dialect, in this order (service/dialect_ops.h registers one entry for each).
inline constexpr Dialect kDialects[] = {Dialect::kJax, Dialect::kTpuInferenceV3,
                                        Dialect::kTpuInferenceV3Hd64};

// "jax", "tpu_inference_v3", "tpu_inference_v3_hd64": the case file's `dialect` member and
// the CLI's --dialect.
std::string_view dialect_name(Dialect d);
std::optional<Dialect> parse_dialect(std::string_view name);
inline bool is_v3(Dialect d) { return d != Dialect::kJax; }

}  // namespace rpa
