// A CaseSpec as bytes and as hex: the bytes from which ByteSource builds the spec again,
// so any RapidCheck counterexample can be replayed (`rpa gen --spec`) or kept as a fuzz seed.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "casegen/byte_source.h"
#include "casegen/jax_build_case.h"
#include "casegen/jax_case_spec.h"

namespace rpa::props {

// The bytes from which ByteSource builds `spec` again. Options only narrow the choices,
// so a spec built with any options encodes under widest_options(), the default here.
std::vector<uint8_t> encode_case(const CaseSpec& spec,
                                 const BuildOptions& options = widest_options());
CaseSpec decode_case(std::span<const uint8_t> bytes,
                     const BuildOptions& options = widest_options(),
                     ByteOrder order = ByteOrder::kLittle);

// encode_case in lower-case hex, as `rpa gen --spec` takes it.
std::string spec_hex(const CaseSpec& spec);
// The spec a hex text names: nullopt unless it is exactly the canonical encoding of a
// spec (even-length hex, no bytes missing or left over), so a truncated or padded
// replay line is refused rather than read as some other case.
std::optional<CaseSpec> spec_from_hex(std::string_view hex);

}  // namespace rpa::props
