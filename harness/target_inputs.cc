// The byte-decoding fuzz targets' tags and the production call's head, every family's
// (harness/target_inputs.h).
#include "harness/target_inputs.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "casegen/byte_source.h"

namespace rpa::fuzz {

std::optional<std::span<const uint8_t>> v3_payload(std::span<const uint8_t> bytes) {
  if (bytes.size() < 2 || bytes[0] != kV3Tag[0] || bytes[1] != kV3Tag[1]) return std::nullopt;
  return bytes.subspan(2);
}

std::vector<uint8_t> with_v3_tag(std::span<const uint8_t> payload) {
  std::vector<uint8_t> out(payload.size() + 2);
  out[0] = kV3Tag[0];
  out[1] = kV3Tag[1];
  std::copy(payload.begin(), payload.end(), out.begin() + 2);
  return out;
}

std::optional<std::span<const uint8_t>> production_payload(std::span<const uint8_t> bytes) {
  if (bytes.size() < 2 || bytes[0] != kProductionTag[0] || bytes[1] != kProductionTag[1]) {
    return std::nullopt;
  }
  return bytes.subspan(2);
}

Dialect production_dialect(std::span<const uint8_t> payload) {
  return props::decode_with<props::ProductionSpec>(payload, [](auto& io, props::ProductionSpec& s) {
           int64_t d = 0;
           io.num(d, 0, 2, {});
           s.dialect = kDialects[d];
         }).dialect;
}

std::string production_replay(const props::ProductionSpec& spec) {
  return "production call " + props::production_spec_hex(spec) + "\n" + props::describe(spec) +
         "\n";
}

void check_held_bytes(const props::ProductionSpec& s, int64_t held, const std::string& replay) {
  const int64_t formula = s.memory_bytes();
  if (std::abs(held - formula) > props::memory_bytes_slack(s) ||
      formula > props::kProductionMemoryBytes) {
    std::fprintf(stderr,
                 "fuzz_validate (production): the call holds %lld bytes, memory_bytes() says "
                 "%lld, the bound is %lld\n%s",
                 static_cast<long long>(held), static_cast<long long>(formula),
                 static_cast<long long>(props::kProductionMemoryBytes), replay.c_str());
    std::abort();
  }
}

}  // namespace rpa::fuzz
