#include "schedule/path_features.h"

namespace rpa {

void PathFeatures::hit(std::string_view name, int64_t n) {
  auto it = counts_.find(name);
  if (it == counts_.end()) it = counts_.emplace(std::string(name), 0).first;
  it->second += n;
}

int64_t PathFeatures::count(std::string_view name) const {
  const auto it = counts_.find(name);
  return it == counts_.end() ? 0 : it->second;
}

const char* block_run_kind(int64_t idx, int64_t first, int64_t end) {
  if (end - first <= 1) return "only";
  if (idx == first) return "first";
  if (idx + 1 == end) return "last";
  return "middle";
}

const char* window_start_kind(int64_t first_kept_key, int64_t bkv, int64_t effective) {
  if (first_kept_key <= 0) return "covers_all";
  if (first_kept_key >= effective) return "past_effective";
  if (first_kept_key % bkv == 0) return "starts_at_block_edge";
  const int64_t block = first_kept_key / bkv, last = (effective - 1) / bkv;
  if (block < last) return "starts_inside_block";
  return effective % bkv != 0 ? "starts_inside_partial_last_block" : "starts_inside_last_block";
}

const char* wrap_margin_bucket(int64_t margin) {
  if (margin < 0) return "wraps";
  if (margin == 0) return "at";
  if (margin <= 16) return "within_16";
  if (margin <= 256) return "within_256";
  if (margin <= 4096) return "within_4096";
  if (margin <= 32768) return "within_32768";
  return "far";
}

}  // namespace rpa
