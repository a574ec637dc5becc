// The rpa CLI's exit codes (DESIGN.md section 8).
#pragma once

namespace rpa {

inline constexpr int kExitOk = 0;          // valid (and agreeing)
inline constexpr int kExitMismatch = 1;    // an output disagrees with the reference
inline constexpr int kExitRejected = 2;    // validation rejected the case
inline constexpr int kExitUnreadable = 3;  // unreadable or malformed input
inline constexpr int kExitUsage = 64;      // bad command line (sysexits' EX_USAGE)

}  // namespace rpa
