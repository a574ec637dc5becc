#include "cli/campaign_run.h"

#include <charconv>

namespace rpa {
namespace {

// Decimal digits only (no sign, no spaces), as a whole.
std::optional<int64_t> parse_count(std::string_view v) {
  int64_t n = 0;
  if (v.empty() || v.front() < '0' || v.front() > '9') return std::nullopt;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size()) return std::nullopt;
  return n;
}

}  // namespace

std::optional<Shard> parse_shard(std::string_view text) {
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const std::optional<int64_t> index = parse_count(text.substr(0, slash));
  const std::optional<int64_t> count = parse_count(text.substr(slash + 1));
  if (!index || !count || *count < 1 || *count > kMaxShards || *index >= *count) {
    return std::nullopt;
  }
  return Shard{*index, *count};
}

std::string shard_text(const Shard& s) {
  return std::to_string(s.index) + "/" + std::to_string(s.count);
}

}  // namespace rpa
