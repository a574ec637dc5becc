// The batch mix a server produces, in every dialect: decode rows (q_len 1), prefill rows
// (q_len up to kv_len), or both.
#pragma once

#include <cstdint>
#include <string_view>

namespace rpa::props {

enum class Profile : uint8_t { kMixed, kDecode, kPrefill };

inline constexpr Profile kProfiles[] = {Profile::kMixed, Profile::kDecode, Profile::kPrefill};

// "mixed", "decode", "prefill".
std::string_view profile_name(Profile p);

}  // namespace rpa::props
