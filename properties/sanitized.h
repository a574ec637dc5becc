// Whether this build runs under AddressSanitizer (clang's __has_feature, gcc's macro): tests
// that check answers on large calls keep to small ones there.
#pragma once

namespace rpa::props {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace rpa::props
