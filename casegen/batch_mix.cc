#include "casegen/batch_mix.h"

namespace rpa::props {

std::string_view profile_name(Profile p) {
  switch (p) {
    case Profile::kMixed:
      return "mixed";
    case Profile::kDecode:
      return "decode";
    case Profile::kPrefill:
      return "prefill";
  }
  return "?";
}

}  // namespace rpa::props
