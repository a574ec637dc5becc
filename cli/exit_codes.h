// The rpa CLI's exit codes (DESIGN.md section 8).
#pragma once

#include "service/check_case.h"

namespace rpa {

inline constexpr int kExitOk = 0;          // valid (and agreeing)
inline constexpr int kExitMismatch = 1;    // an output disagrees with the reference
inline constexpr int kExitRejected = 2;    // validation rejected the case
inline constexpr int kExitUnreadable = 3;  // unreadable or malformed input
inline constexpr int kExitUsage = 64;      // bad command line (sysexits' EX_USAGE)

// The exit code of a single check with this verdict (biased is 1).
inline int verdict_exit(CheckVerdict v) {
  switch (v) {
    case CheckVerdict::kAgree: return kExitOk;
    case CheckVerdict::kMismatch:
    case CheckVerdict::kBiased: return kExitMismatch;
    case CheckVerdict::kRejected: return kExitRejected;
    case CheckVerdict::kUnreadable: return kExitUnreadable;
    case CheckVerdict::kNotApplicable: return kExitUsage;
  }
  return kExitUsage;
}

}  // namespace rpa
