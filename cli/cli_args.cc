#include "cli/cli_args.h"

#include <cstdio>

#include "cli/exit_codes.h"

namespace rpa {

const char* const kUsage =
    "usage: rpa <command> [options]\n"
    "\n"
    "commands:\n"
    "  validate CASE.npz [--mode native|jax|strict] [--all] [--json]\n"
    "      Check a case against the rules of one mode (default strict); native: the\n"
    "      case's dialect's own validators (jax: JAX 0.10.2's; tpu_inference_v3[_hd64]:\n"
    "      tpu-inference 0.32.0's), jax the same.\n"
    "      Exit 0 valid, 2 rejected (rule and message on stderr).\n"
    "  run CASE.npz --impl reference|kernel [-o OUT.npz] [--threads N]\n"
    "      [--schedule default|literal] [--semantics kernel|reference] [--mode jax|strict]\n"
    "      [--json]\n"
    "      Validate, compute the output, and write OUT.npz: the case plus `out`.\n"
    "      --semantics (with --impl reference): kernel (default) keeps the softmax\n"
    "      weights unrounded and rounds once to q's dtype, as JAX's Pallas kernel does;\n"
    "      reference rounds p and p.V to V's dtype, as JAX's ref_ragged_paged_attention.\n"
    "      --schedule literal (or --literal): the kernel runs the Pallas program itself\n"
    "      (grid order, prefetch chain, scratch carried across grid cells, every slot\n"
    "      computed over); with --mode jax on any input jax mode accepts, to show what\n"
    "      the TPU kernel computes where the definition does not hold.\n"
    "      A v3 dialect's case: OUT.npz gets `out` and `kv_cache_out` (the fused cache\n"
    "      update); the kernel reads the packed cache in place (default schedule only).\n"
    "  check CASE.npz|DIR... [--mode jax|strict] [--threads N] [--schedule default|literal]\n"
    "      [--oracle reference|literal] [--semantics kernel|reference] [--allow-bias]\n"
    "      [--dot-passes 6|3|1] [--junit FILE] [--json]\n"
    "      Validate, then compare the case's `out` (without one: the tiled kernel's\n"
    "      output) with the dense reference in the given semantics (default kernel:\n"
    "      what a correct TPU kernel computes; reference: JAX's reference, with the\n"
    "      looser tolerance its rounding of p needs), or (--oracle literal) with the\n"
    "      literal schedule under its much tighter tolerance: is `out` what the Pallas\n"
    "      kernel computes? With --mode jax on any input jax mode accepts. Reports the\n"
    "      check's discrimination (least allowed / |want|; below 1 an all-zero output\n"
    "      fails) and warns when it could not reject an all-zero output, and the least\n"
    "      weight of a key whose dropping it is sure to catch (a key whose value lies\n"
    "      max|V| from the other keys' mean). --dot-passes: the bfloat16 passes a TPU\n"
    "      makes of a float32 dot in the kernel semantics (default 6, float32 contract\n"
    "      precision; 3 is Precision.HIGH, 1 DEFAULT, which rounds p). Also reports\n"
    "      the signed error in ulps of the output dtype (mean, standard error, exact\n"
    "      share): a bfloat16 output biased beyond 6 standard errors and 0.1 ulp\n"
    "      is 'biased' (exit 1) unless --allow-bias.\n"
    "      Several files, or directories (every .npz below them): one line per case\n"
    "      (verdict, worst error / tolerance, bias) and a total; --junit FILE writes a\n"
    "      JUnit report. Exit 0 agree, 1 mismatch or biased (any of them), 2 rejected,\n"
    "      3 unreadable (the worst of the rest).\n"
    "  replay DIR... [--junit FILE]\n"
    "      Every case of corpus folders through what its folder expects: modes/ and\n"
    "      findings/ against expectations.tsv (both modes' verdicts), regressions/\n"
    "      against expectations.tsv (rpa check options and verdict), fuzz/<target>/\n"
    "      through the target (each file in a child process); fuzz/ or corpus/ for all\n"
    "      below them. One line per case and a total. Exit 0 all pass, 1 any fails.\n"
    "  gen (--seed S [--profile decode|prefill|mixed|long|long32k|edge|production]\n"
    "      [--size 0..400] [--head-dim D] | --spec HEX) [--dialect jax|tpu_inference_v3|\n"
    "      tpu_inference_v3_hd64] [--features [--target NAME]] -o CASE.npz\n"
    "      Write a generated case: from a seed (a valid case; long: kv_len up to 8192\n"
    "      with float8 KV; edge: one with one or two named mutations; size as\n"
    "      RapidCheck's, default 100), or from the spec hex a\n"
    "      failing property printed. Prints the case and the verdicts the spec model\n"
    "      expects in each mode. A v3 dialect's cases are all valid (edge: small\n"
    "      batches at their boundaries; long32k: one or two sequences of kv_len 32768\n"
    "      to 65536, the long tier, past the spec's bounds: the case file replays it);\n"
    "      its spec hex starts with 'v3:' and names the dialect. production (any\n"
    "      dialect): a call shaped as vLLM's TPU runner builds it (128-512 slots, token\n"
    "      budgets to 8192, a real model's heads, page_size 16-256, max_model_len to\n"
    "      128K, integer edges), at most 256 MiB of arrays and 2^30 multiply-adds; its\n"
    "      spec starts with 'prod:' and names the dialect.\n"
    "      --features: then the path features of the program the call runs on\n"
    "      --target (default v6e), one 'feature NAME COUNT' line each.\n"
    "  campaign [--seconds N | --cases N] [--shard I/N] [--seed S] [--max-size 0..400]\n"
    "      [--report DIR] [--pallas N [--ray ADDRESS|local]] [--junit FILE] [--dot-passes 6|3|1]\n"
    "      [--profile production]\n"
    "      The main job, on every core: for N seconds (default 60), or through the\n"
    "      cases 0..N-1 (--cases N, 1 to 1000000000; not with --seconds), draw cases from\n"
    "      the property generators (sizes cycling 0..max-size, default 100), check both\n"
    "      validation modes against the spec model and the tiled kernel against the\n"
    "      reference (tolerance and bias); print a summary with a replay command per\n"
    "      finding. --report DIR: also DIR/summary.json, DIR/summary.md and\n"
    "      DIR/report.html (a self-contained page: the run, error / tolerance histograms,\n"
    "      rule coverage, findings with their case files). --junit FILE: one test case\n"
    "      per check class. --pallas N: then N more generated cases of each dialect through\n"
    "      the real kernels in TPU interpret mode, JAX's and tpu-inference's v3 (needs\n"
    "      scripts/python_venv.sh build/venv and scripts/python_v3_venv.sh build/v3venv);\n"
    "      --ray ADDRESS: those cases as Ray tasks on the cluster there (local: a new one\n"
    "      here per cross-check; not with --profile production).\n"
    "      --profile production: every case a production call (rpa gen --profile\n"
    "      production) of jax, tpu_inference_v3 and hd64 in turn, seconds each; the\n"
    "      summary adds the reach table (each item: how many calls drew it); with\n"
    "      --pallas N, N production calls of each dialect (at most 8 sequences) go\n"
    "      through the real kernels.\n"
    "      --shard I/N (N 1 to 4096): only the case indices i with i % N == I, one job\n"
    "      of a job array; --report DIR also writes DIR/campaign-state.txt for rpa merge.\n"
    "      Exit 0 none, 1 findings.\n"
    "  merge DIR... -o OUT [--junit FILE]\n"
    "      The shards of one campaign (each DIR an rpa campaign --shard I/N --report DIR)\n"
    "      into OUT: the summary and report one unsharded run of the same cases writes\n"
    "      (seconds: the longest shard's; workers: their sum). Exit 0 none, 1 findings,\n"
    "      2 not every shard of one campaign once, 3 a state unreadable.\n"
    "  bench [--preset quick|decode|prefill|mixed|v3|v3-decode|production[:NAME]]\n"
    "      [--threads 1,2,all] [--json]\n"
    "      Time the tiled kernel on each thread count of the sweep (default 1,2,all)\n"
    "      and the dense reference on the named workloads, against this machine's\n"
    "      triad bandwidth and GEMM peak measured on as many threads (default preset\n"
    "      quick); %limit is the roofline bound over the kernel's time. v3: decode and\n"
    "      mixed in both dialects (tpu-inference v3's packed cache, updated in place),\n"
    "      then each v3 workload against its jax twin in 43 alternating rounds: the\n"
    "      median and quartiles of v3's %limit over jax's; v3-decode: decode only.\n"
    "      production[:NAME]: fixed production-size calls (the longest context, the\n"
    "      fullest serving batch, kernel.py's int16 edge) through validation, the\n"
    "      dense reference, the tiled kernel (--threads N, default all) and the\n"
    "      literal schedules, each stage timed once and checked; minutes in all.\n"
    "\n"
    "common options:\n"
    "  --target NAME   TPU generation for the strict VMEM/SMEM budget: v2 v3 v4 v4i v5e v5p\n"
    "                  v6e 7x (default v6e)\n"
    "  --max-bytes N   refuse case files whose arrays exceed N bytes (default 8 GiB)\n"
    "\n"
    "exit codes: 0 ok, 1 mismatch, 2 rejected by validation, 3 unreadable input, 64 usage\n";

int usage_error(const std::string& what) {
  std::fprintf(stderr, "rpa: %s\n%s", what.c_str(), kUsage);
  return kExitUsage;
}

std::string parse_cli_args(const std::vector<std::string_view>& args,
                           const std::set<std::string_view>& allowed, CliArgs& out,
                           bool many_paths) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (!a.starts_with("-") || a == "-") {
      if (!out.path.empty() && !many_paths) return "more than one case file given";
      if (out.path.empty()) out.path = a;
      out.paths.emplace_back(a);
      continue;
    }
    if (!allowed.contains(a)) return "unknown option " + std::string(a);
    if (a == "--json") {
      out.json = true;
      continue;
    }
    if (a == "-o" || a == "--junit") {
      if (i + 1 >= args.size()) return std::string(a) + " needs a value";
      (a == "-o" ? out.output : out.junit) = args[++i];
      continue;
    }
    std::optional<std::string> err = parse_case_option(args, i, out);
    if (!err) return "unknown option " + std::string(a);
    if (!err->empty()) return *err;
  }
  if (out.path.empty()) return "no case file given";
  return "";
}

std::optional<Case> read_case_or_report(const CliArgs& args) {
  CaseReadResult read = read_case_file(args.path, args.read);
  if (read.value) return std::move(read.value);
  std::fprintf(stderr, "rpa: %s\n", read.error.c_str());
  if (args.json) {
    std::printf(
        "%s\n",
        JsonWriter().begin_object().key("error").value(read.error).end_object().str().c_str());
  }
  return std::nullopt;
}

}  // namespace rpa
