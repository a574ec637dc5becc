#include "casegen/production_reach.h"

#include <algorithm>
#include <utility>

namespace rpa::props {

void ProductionReach::add(const ProductionSpec& s) {
  DialectReach& r = by_dialect_[std::string(dialect_name(s.dialect))];
  if (r.calls == 0) {
    for (const std::string& item : production_reach_catalog(s.dialect)) r.items.emplace(item, 0);
  }
  ++r.calls;
  r.longest_kv_len = std::max(r.longest_kv_len, s.max_kv_len());
  r.most_rows = std::max(r.most_rows, s.total_q_len());
  r.highest_position = std::max(r.highest_position, s.max_kv_len() - 1);
  for (const std::string& item : production_reach_items(s)) ++r.items[item];
}

void ProductionReach::merge(const ProductionReach& other) {
  for (const auto& [d, o] : other.by_dialect_) {
    DialectReach& r = by_dialect_[d];
    r.calls += o.calls;
    r.longest_kv_len = std::max(r.longest_kv_len, o.longest_kv_len);
    r.most_rows = std::max(r.most_rows, o.most_rows);
    r.highest_position = std::max(r.highest_position, o.highest_position);
    for (const auto& [item, n] : o.items) r.items[item] += n;
  }
}

void ProductionReach::restore(const std::string& dialect, DialectReach reach) {
  by_dialect_[dialect] = std::move(reach);
}

std::vector<std::string> ProductionReach::never_reached() const {
  std::vector<std::string> out;
  for (const auto& [d, r] : by_dialect_) {
    for (const auto& [item, n] : r.items) {
      if (n == 0) out.push_back(d + ": " + item);
    }
  }
  return out;
}

std::string ProductionReach::text(const std::string& indent) const {
  std::string s;
  for (const auto& [d, r] : by_dialect_) {
    s += indent + d + ": " + std::to_string(r.calls) + " production calls, longest kv_len " +
         std::to_string(r.longest_kv_len) + ", most rows " + std::to_string(r.most_rows) +
         ", highest position " + std::to_string(r.highest_position) + "\n" + indent + "  ";
    size_t width = indent.size() + 2;
    for (const auto& [item, n] : r.items) {
      const std::string cell = item + " " + std::to_string(n) + ";";
      if (width + cell.size() + 1 > 100) {
        s += "\n" + indent + "  ";
        width = indent.size() + 2;
      }
      s += cell + " ";
      width += cell.size() + 1;
    }
    s += "\n";
  }
  return s;
}

}  // namespace rpa::props
