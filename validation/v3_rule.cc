#include "validation/v3_rule.h"

#include <array>

namespace rpa {
namespace {

constexpr std::array kV3Rules = {
#define RPA_V3_RULE_INFO(id, v3, hd64, strict, crash, reason) \
  V3RuleInfo{V3RuleId::id, #id, v3, hd64, strict, crash, reason},
    RPA_V3_RULES(RPA_V3_RULE_INFO)
#undef RPA_V3_RULE_INFO
};

}  // namespace

std::span<const V3RuleInfo> v3_rule_table() { return kV3Rules; }

const V3RuleInfo& v3_rule_info(V3RuleId id) { return kV3Rules[static_cast<size_t>(id)]; }

}  // namespace rpa
