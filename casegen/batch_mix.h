// The batch mix a server produces, in every dialect: decode rows (q_len 1), prefill rows
// (q_len up to kv_len), or both; and a sequence's two lengths (SeqSpec), which the jax case
// spec and the production recipe hold.
#pragma once

#include <cstdint>
#include <string_view>

namespace rpa::props {

enum class Profile : uint8_t { kMixed, kDecode, kPrefill };

inline constexpr Profile kProfiles[] = {Profile::kMixed, Profile::kDecode, Profile::kPrefill};

// "mixed", "decode", "prefill".
std::string_view profile_name(Profile p);

struct SeqSpec {
  int64_t q_len = 0;   // 0 <= q_len <= kv_len
  int64_t kv_len = 0;  // <= pages_per_seq * page_size
  bool operator==(const SeqSpec&) const = default;
};

}  // namespace rpa::props
