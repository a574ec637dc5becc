// The RapidCheck generator of v3 cases: build_v3_case with RapidCheck's picks (RcSource),
// so shrinking works on the choices, and a showValue that prints the case and its replay
// line (`rpa gen --dialect D --spec v3:HEX`).
#pragma once

#include <rapidcheck.h>

#include <ostream>

#include "properties/jax_rc_case.h"
#include "casegen/v3_build_case.h"
#include "casegen/v3_case_spec.h"

namespace rpa::props {

inline rc::Gen<V3CaseSpec> gen_v3_case(V3BuildOptions options = {}) {
  return rc::gen::exec([options] {
    RcSource source;
    return build_v3_case(source, options);
  });
}

inline void showValue(const V3CaseSpec& spec, std::ostream& os) {
  os << describe(spec) << "\n  replay: rpa gen --dialect " << dialect_name(spec.dialect)
     << " --spec " << v3_spec_hex(spec) << " -o case.npz";
}

}  // namespace rpa::props
