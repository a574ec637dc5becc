// Whether this build runs under AddressSanitizer (clang's __has_feature, gcc's macro): tests
// that check answers on large calls keep to small ones there (the numbers at full size are the
// release build's to check; the sanitizers look for memory and undefined behaviour, which the
// same loops at a quarter of the length walk as well, in a quarter of the time).
#pragma once

#include <cstdint>

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

// The longest member a test at production lengths runs under ASan (longer ones run in the
// release build), and whether it skips one of `len` tokens.
inline constexpr int64_t kSanitizedMaxLen = 8192;
constexpr bool sanitized_skip(int64_t len) { return kSanitized && len > kSanitizedMaxLen; }

// A long-context generator's options (long_context_options(), v3_long_options()) with their
// kv_len bound cut to a quarter under ASan, unchanged elsewhere.
template <class Options>
Options sanitized_long(Options o) {
  if constexpr (kSanitized) o.max_kv_len /= 4;
  return o;
}

}  // namespace rpa::props
