// The reach table of the production profile (docs/properties.md, "Reach"): over the
// production calls a run checked, per dialect, how often each item of the dialect's catalog
// (production_reach_catalog) was drawn, and the longest kv_len, the most token rows and the
// highest query position reached. The campaign, the tests and the Python cross-checks print
// it; an item at 0 is one the run never reached.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/dialect.h"
#include "casegen/production.h"

namespace rpa::props {

struct DialectReach {
  int64_t calls = 0;
  int64_t longest_kv_len = 0;
  int64_t most_rows = 0;         // sum of q_len
  int64_t highest_position = 0;  // the largest kv_len - 1 of a row that runs
  std::map<std::string, int64_t> items;  // every catalog item, 0 when never drawn
};

class ProductionReach {
 public:
  void add(const ProductionSpec& s);
  void merge(const ProductionReach& other);
  // Puts back one dialect's tallies as a saved run had them (rpa campaign's state file,
  // cli/campaign_state.h), in place of what this reach holds for it.
  void restore(const std::string& dialect, DialectReach reach);
  bool empty() const { return by_dialect_.empty(); }
  const std::map<std::string, DialectReach>& by_dialect() const { return by_dialect_; }
  // The catalog items of the dialects seen that no call reached, "dialect: item".
  std::vector<std::string> never_reached() const;
  // Lines of text: per dialect, its calls and extremes, then every item with its count.
  std::string text(const std::string& indent) const;

 private:
  std::map<std::string, DialectReach> by_dialect_;  // by dialect_name
};

}  // namespace rpa::props
