#include <algorithm>
#include <cstdio>

#include "cli/cli_args.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "kernel/paged_kv_view.h"
#include "kernel/tiled_kernel.h"
#include "reference/dense_reference.h"

namespace rpa {

int run_command(const std::vector<std::string_view>& args) {
  CliArgs a;
  if (std::string err = parse_cli_args(
          args,
          {"--impl", "-o", "--threads", "--literal", "--schedule", "--semantics", "--mode", "--json",
           "--target", "--max-bytes"},
          a);
      !err.empty()) {
    return usage_error(err);
  }
  if (a.impl != "reference" && a.impl != "kernel") {
    return usage_error(a.impl.empty() ? "run needs --impl reference or --impl kernel"
                                      : "--impl takes reference or kernel");
  }
  if (a.literal && a.impl != "kernel") {
    return usage_error("--schedule literal needs --impl kernel");
  }
  if (a.semantics && a.impl != "reference") {
    return usage_error("--semantics chooses the dense reference's rounding points: it needs "
                       "--impl reference");
  }
  std::optional<Case> c = read_case_or_report(a);
  if (!c) return kExitUnreadable;
  // The literal schedule says what the Pallas kernel computes: in jax mode it needs no
  // defined output, only an input the Pallas kernel runs on.
  const bool jax_literal = a.literal && a.validate.mode == Mode::kJax;
  if (jax_literal ? !literal_jax_ok(*c, a) : !validate_for_compute(*c, a)) return kExitRejected;
  const KernelOptions options = kernel_options(a);
  Tensor out = a.impl == "kernel" ? tiled_attention(c->inputs, c->params, options)
                                  : dense_reference(c->inputs, c->params, a.reference_semantics()).out;
  // Defined rows; jax mode's literal schedule also takes a negative cu_q_lens[num_seqs].
  const int64_t rows =
      std::clamp<int64_t>(PagedKvView(c->inputs).total_q_tokens(), 0, c->inputs.q.dim(0));
  if (!a.output.empty()) {
    c->out = std::move(out);
    if (std::string err; !write_case_file(a.output, *c, &err)) {
      std::fprintf(stderr, "rpa: %s\n", err.c_str());
      return kExitUnreadable;
    }
  }
  if (a.json) {
    JsonWriter j;
    j.begin_object().key("valid").value(true).key("impl").value(a.impl);
    j.key("rows").value(rows);
    if (a.impl == "reference") j.key("semantics").value(semantics_name(a.reference_semantics()));
    if (a.impl == "kernel") {
      const KernelPlan plan =
          plan_kernel(c->inputs, c->params, options.target, options.untuned_blocks);
      j.key("schedule").value(a.literal ? "literal" : "default");
      j.key("blocks").begin_array();
      j.value(plan.blocks.kv_pages_per_block).value(plan.blocks.queries_per_block).end_array();
      j.key("heads_per_block").begin_array();
      j.value(plan.heads.q_heads).value(plan.heads.combined_kv_heads).end_array();
    }
    if (!a.output.empty()) j.key("output").value(a.output);
    std::printf("%s\n", j.end_object().str().c_str());
  } else {
    const std::string what =
        a.impl == "kernel" ? a.impl : a.impl + " (" + semantics_label(a.reference_semantics()) + ")";
    std::printf("%s: computed %lld rows with the %s%s%s\n", a.path.c_str(),
                static_cast<long long>(rows), what.c_str(), a.output.empty() ? "" : ", wrote ",
                a.output.c_str());
  }
  return kExitOk;
}

}  // namespace rpa
