// rpa gen's v3 part (cli/dialect_commands.h: gen): a case of a v3 dialect from --seed (and
// --profile, --size, --head-dim) under --dialect, or from the 'v3:' hex --spec, which names
// its dialect.
#pragma once

#include <optional>

#include "cli/gen_args.h"
#include "core/dialect.h"
#include "casegen/v3_build_case.h"

namespace rpa {

// `requested`: --dialect, if given; a spec's dialect must agree with it, and without a 'v3:'
// spec it is a v3 dialect. Returns the exit code.
int gen_v3_dialect(std::optional<Dialect> requested, const GenArgs& a);

}  // namespace rpa
