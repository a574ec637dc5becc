#include "validation/jax_rule.h"

#include <array>

namespace rpa {
namespace {

constexpr std::array kRules = {
#define RPA_RULE_INFO(id, jax, strict, crash, reason) \
  RuleInfo{RuleId::id, #id, jax, strict, crash, reason},
    RPA_RULES(RPA_RULE_INFO)
#undef RPA_RULE_INFO
};

}  // namespace

std::span<const RuleInfo> rule_table() { return kRules; }

const RuleInfo& rule_info(RuleId id) { return kRules[static_cast<size_t>(id)]; }

}  // namespace rpa
