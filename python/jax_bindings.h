// The jax dialect's part of the Python binding (python/jax_bindings.cc): its functions
// (validate, run, plan, gen, gen_spec, decode, workload, rules) and its marshalling, which
// python/bindings.cc registers.
#pragma once

#include <nanobind/nanobind.h>

#include <string>

#include "casefile/case.h"
#include "python/marshal.h"

namespace rpa::py {

// Defines the jax dialect's functions on the module.
void bind_jax(nanobind::module_& m);

// The jax dialect's DialectMarshal entry (python/marshal.h).
void jax_to_case(const ArrayMap& arrays, const ParamMap& params, BorrowedCase& b);
void jax_from_case(Case& c, nb::dict& arrays, nb::dict& params);
nb::tuple jax_production_generated(const props::ProductionSpec& spec, const std::string& hex,
                                   const std::string& description);

}  // namespace rpa::py
