// The tpu-inference v3 dialects' part of the Python binding (python/v3_bindings.cc, DESIGN.md
// section 16): their functions (v3_validate, v3_run, v3_check, v3_gen, v3_gen_spec, v3_decode,
// v3_mutation_names, v3_strict_unreachable, v3_rules) and their marshalling, which
// python/bindings.cc registers for both (kernel.py and kernel_hd64.py).
#pragma once

#include <nanobind/nanobind.h>

#include <string>

#include "casefile/case.h"
#include "python/marshal.h"

namespace rpa::py {

// Defines the v3 dialects' functions on the module.
void bind_v3(nanobind::module_& m);

// The v3 dialects' DialectMarshal entry (python/marshal.h).
void v3_to_case(const ArrayMap& arrays, const ParamMap& params, BorrowedCase& b);
void v3_from_case(Case& c, nb::dict& arrays, nb::dict& params);
nb::tuple v3_production_generated(const props::ProductionSpec& spec, const std::string& hex,
                                  const std::string& description);

}  // namespace rpa::py
