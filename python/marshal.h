// What the Python binding's sources share (python/bindings.cc, jax_bindings.cc,
// v3_bindings.cc): Python's arrays and keywords into the library's Case (borrowing their
// memory) and back into numpy arrays, the commands' flags, and the Python marshalling of each
// dialect behind one interface (DialectMarshal), so that a generic binding asks
// dialect_marshal(case.dialect) instead of naming the dialects. Each dialect fills its entry in
// its own file (python/jax_bindings.h, python/v3_bindings.h); python/bindings.cc, the one
// python/ file that names them all, lists them.
//
// Arrays cross as (dtype name, array): the package's Python side names numpy's or
// ml_dtypes' dtype and hands over the bits (bfloat16 as uint16, float8 as uint8), never
// values converted through float.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "casefile/case.h"
#include "core/dialect.h"
#include "core/tensor.h"
#include "service/case_options.h"
#include "service/rule_report.h"
#include "validation/mode.h"

namespace rpa::props {
struct ProductionSpec;
}  // namespace rpa::props

namespace rpa::py {

namespace nb = nanobind;

using Array = nb::ndarray<nb::ro, nb::device::cpu>;
// A case's arrays and parameters as the Python side holds them: name -> (dtype name, array)
// and name -> value (None for an absent parameter).
using ArrayMap = std::vector<std::pair<std::string, std::pair<std::string, nb::object>>>;
using ParamMap = nb::dict;

// The dtype names rpa reads, comma-separated (for the messages that list them).
std::string dtype_list();

// A borrowed Tensor over the array's memory: it must be C-contiguous and hold the bits of
// `dtype` (its itemsize). Throws std::invalid_argument (ValueError) naming the array.
// `keep` holds the array handles for as long as the tensor is used.
Tensor borrow_array(const std::string& name, const std::string& dtype, const nb::object& obj,
                    std::vector<Array>& keep);

// A keyword's value, nullopt where it is absent or None.
std::optional<double> opt_float(const ParamMap& p, const char* key);
std::optional<int64_t> opt_int(const ParamMap& p, const char* key);
std::optional<bool> opt_bool(const ParamMap& p, const char* key);

// A Case over the caller's arrays (borrowed) and the handles that keep them readable. Hidden,
// as nanobind's own types are (the module builds with hidden visibility).
struct [[gnu::visibility("hidden")]] BorrowedCase {
  Case c;
  std::vector<Array> keep;
};

// The Case the arrays and parameters describe (params["dialect"] names its dialect; absent:
// jax), through its dialect's DialectMarshal::to_case.
BorrowedCase to_case(const ArrayMap& arrays, const ParamMap& params);

// A numpy array that owns the tensor (moved, not copied): numpy's own dtype where it has
// one, else the bits (bfloat16 and float16 as uint16, float8 as uint8).
nb::object to_numpy(Tensor t);
// (dtype name, numpy array).
nb::tuple typed(Tensor t);

// A Case as the Python side builds rpa.Case from it: (arrays, params), the dialect's name
// under params["dialect"], its inputs and keywords through its dialect's
// DialectMarshal::from_case.
nb::tuple from_case(Case c);

// Options as the commands' flags for a case named `label`, parsed by the service's parser (as
// the commands parse them); a bad value raises ValueError with the command's message.
CaseOptions parse_flags(const std::vector<std::string>& flags,
                        const std::set<std::string_view>& allowed, const std::string& label = "case");

// rpa run's options, for a case named "case".
CaseOptions run_args(const std::vector<std::string>& flags);

// A rejection's why, mode and rule (None, with its message, where no rule rejected it).
nb::object rejection_dict(const std::string& why, Mode mode, const std::optional<RuleReport>& rule);

// A dialect's Python marshalling: how its calls cross into a Case and back.
struct DialectMarshal {
  Dialect dialect = Dialect::kJax;
  // A call's arrays and keywords (its kernel's argument names) into b.c, whose dialect is set;
  // std::invalid_argument (ValueError) for an unknown or missing array or a bad keyword.
  void (*to_case)(const ArrayMap& arrays, const ParamMap& params, BorrowedCase& b) = nullptr;
  // A case's inputs and keywords (the keywords its kernel takes) into the dicts rpa.Case is
  // built from, after its out and expected; the tensors are moved out of c.
  void (*from_case)(Case& c, nb::dict& arrays, nb::dict& params) = nullptr;
  // A production call of the dialect (casegen/production.h) as the Python side keeps a
  // generated case: (arrays, params, hex, description, strict verdict, native verdict), with
  // the call's own prod: hex and description.
  nb::tuple (*production_generated)(const props::ProductionSpec& spec, const std::string& hex,
                                    const std::string& description) = nullptr;
};

// The dialect's entry (python/bindings.cc); every Dialect of core/dialect.h has one.
const DialectMarshal& dialect_marshal(Dialect d);

}  // namespace rpa::py
