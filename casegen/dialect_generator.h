// What the case generator asks of every dialect, behind one interface (issue 48): the pieces
// of the production recipe (casegen/production.h) that depend on the dialect's calling
// convention, so that the generic recipe asks dialect_generator(d) instead of naming the
// dialects. Each dialect family fills its entries in its own file (casegen/jax_production.cc,
// casegen/v3_production.cc); casegen/dialect_generators.cc, the one casegen file that names
// them all, lists them.
#pragma once

#include <cstdint>

#include "casefile/case.h"
#include "core/dialect.h"
#include "casegen/production.h"

namespace rpa::props {

struct DialectGenerator {
  Dialect dialect = Dialect::kJax;
  // The bytes a cached token of the recipe's call takes in the dialect's KV cache: K and V of
  // every kv head (v3: the packed record as V3CacheLayout lays it out, heads padded to the
  // packing and lanes to 128). production_cache_token_bytes() of production.h.
  int64_t (*production_cache_token_bytes)(const ProductionSpec& s) = nullptr;
  // The call a recipe names, materialized (data drawn) as a case of the dialect: what
  // `rpa gen --profile production` writes.
  Case (*production_call)(const ProductionSpec& s) = nullptr;
};

// The dialect's entry; every Dialect of core/dialect.h has one.
const DialectGenerator& dialect_generator(Dialect d);

}  // namespace rpa::props
