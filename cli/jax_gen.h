// rpa gen's jax part (cli/dialect_commands.h: gen): a case of the jax dialect from --seed
// (and --profile, --size, --head-dim) or from the untagged hex --spec a property printed.
#pragma once

#include <optional>

#include "cli/gen_args.h"
#include "core/dialect.h"

namespace rpa {

// `requested`: --dialect, if given (jax, or none). Returns the exit code.
int gen_jax(std::optional<Dialect> requested, const GenArgs& a);

}  // namespace rpa
