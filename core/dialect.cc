#include "core/dialect.h"

namespace rpa {

std::string_view dialect_name(Dialect d) {
  switch (d) {
    case Dialect::kJax:
      return "jax";
    case Dialect::kTpuInferenceV3:
      return "tpu_inference_v3";
    case Dialect::kTpuInferenceV3Hd64:
      return "tpu_inference_v3_hd64";
  }
  return "jax";
}

std::optional<Dialect> parse_dialect(std::string_view name) {
  for (Dialect d : kDialects) {
    if (dialect_name(d) == name) return d;
  }
  return std::nullopt;
}

}  // namespace rpa
