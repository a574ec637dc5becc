// rpa replay DIR...: every case file of the corpus folders through what its folder expects
// (DESIGN.md sections 8 and 10), one line each and a total.
//   modes/, findings/   expectations.tsv: name, jax verdict, strict verdict, what it shows;
//                       rpa validate's verdict in each mode must be the one listed (for a
//                       case of a v3 dialect the `jax` column is that dialect's native mode)
//   regressions/        expectations.tsv: name, rpa check options, check verdict, what it
//                       shows; rpa check with those options must give that verdict
//   fuzz/<target>/      every file through the target's body (harness/targets.h), each in a
//                       child process, so a crash is a failed line, not the end of the run
//   fuzz/, corpus/      the folders above below them
// Every .npz of modes/, findings/ and regressions/ must have its line in expectations.tsv,
// and every line its file.
#include <sys/wait.h>
#include <csignal>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_args.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/junit_report.h"
#include "harness/targets.h"
#include "service/check_case.h"
#include "service/dialect_ops.h"

namespace rpa {
namespace {

namespace fs = std::filesystem;

struct Replay {
  std::vector<JunitCase> cases;
  int failed = 0;
  const CliArgs* args = nullptr;

  // Records one case and prints its line.
  void record(const std::string& kind, const std::string& name, double seconds,
              const std::string& problem, const std::string& ok_note) {
    JunitCase c;
    c.classname = "rpa.replay." + kind;
    c.name = name;
    c.seconds = seconds;
    if (!problem.empty()) {
      c.outcome = JunitCase::Outcome::kFailure;
      c.type = "unexpected";
      c.message = problem;
      ++failed;
      std::printf("%s/%s: FAIL (%s)\n", kind.c_str(), name.c_str(), problem.c_str());
    } else {
      std::printf("%s/%s: ok (%s)\n", kind.c_str(), name.c_str(), ok_note.c_str());
    }
    std::fflush(stdout);
    cases.push_back(std::move(c));
  }
};

double since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The tab-separated cells of a line, empty ones included (a trailing CR dropped).
std::vector<std::string> split_tabs(std::string line) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
  std::vector<std::string> cells;
  size_t start = 0;
  for (size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1) {
    cells.push_back(line.substr(start, tab - start));
  }
  cells.push_back(line.substr(start));
  return cells;
}

// expectations.tsv's rows (comments and blank lines skipped), each with `columns` cells; an
// error names the line.
std::vector<std::vector<std::string>> read_tsv(const fs::path& path, size_t columns,
                                               std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = path.string() + ": cannot read it";
    return {};
  }
  std::vector<std::vector<std::string>> rows;
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    if (line.empty() || line == "\r" || line[0] == '#') continue;
    std::vector<std::string> cells = split_tabs(line);
    if (cells.size() != columns) {
      error = path.string() + ":" + std::to_string(lineno) + ": " + std::to_string(cells.size()) +
              " tab-separated cells, expected " + std::to_string(columns);
      return {};
    }
    rows.push_back(std::move(cells));
  }
  return rows;
}

// The .npz names (without the extension) of dir, for the unlisted-file check.
std::vector<std::string> npz_names(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file() && e.path().extension() == ".npz") names.push_back(e.path().stem());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Files present but not listed, listed but absent.
void check_listing(Replay& r, const std::string& kind, const fs::path& dir,
                   const std::vector<std::vector<std::string>>& rows) {
  for (const std::string& name : npz_names(dir)) {
    const bool listed = std::any_of(rows.begin(), rows.end(),
                                    [&](const std::vector<std::string>& row) { return row[0] == name; });
    if (!listed) r.record(kind, name + ".npz", 0.0, "no line in expectations.tsv", "");
  }
}

// The native mode's column label: "jax", or "DIALECT native" for a dialect that names itself.
std::string native_label(Dialect d) {
  const DialectOps& ops = dialect_ops(d);
  return ops.reports_dialect ? std::string(dialect_name(d)) + " " + std::string(ops.native_mode)
                             : std::string(ops.native_mode);
}

// The verdict of mode (kJax: the case's dialect's native mode) on the case, as a rule name.
std::string validate_verdict(const Case& c, const CliArgs& a, Mode mode) {
  ValidateOptions options = a.validate;
  options.mode = mode;
  const std::vector<RuleReport> f = dialect_ops(c.dialect).failures(c, options, false);
  return f.empty() ? "valid" : std::string(f.front().rule);
}

// dir/expectations.tsv's rows, or nullopt with its problem recorded as a failed line.
std::optional<std::vector<std::vector<std::string>>> expectations(Replay& r, const std::string& kind,
                                                                  const fs::path& dir) {
  std::string error;
  auto rows = read_tsv(dir / "expectations.tsv", 4, error);
  if (error.empty()) return rows;
  r.record(kind, "expectations.tsv", 0.0, error, "");
  return std::nullopt;
}

// modes/ and findings/: the verdict of each mode.
void replay_modes(Replay& r, const std::string& kind, const fs::path& dir) {
  const auto rows = expectations(r, kind, dir);
  if (!rows) return;
  for (const auto& row : *rows) {
    const auto start = std::chrono::steady_clock::now();
    const fs::path file = dir / (row[0] + ".npz");
    std::string problem;
    std::string got;
    try {
      CaseReadResult read = read_case_file(file.string(), r.args->read);
      if (!read.value) {
        problem = read.error;
      } else {
        const std::string jax = validate_verdict(*read.value, *r.args, Mode::kJax);
        const std::string strict = validate_verdict(*read.value, *r.args, Mode::kStrict);
        // The `jax` column is the case's dialect's native mode (jax for jax cases).
        const std::string native =
            native_label(read.value->dialect);
        got = native + " " + jax + ", strict " + strict;
        if (jax != row[1]) problem = native + ": got " + jax + ", expected " + row[1];
        if (strict != row[2]) {
          problem += (problem.empty() ? "" : "; ") + std::string("strict: got ") + strict +
                     ", expected " + row[2];
        }
      }
    } catch (const std::exception& e) {  // a bug in rpa: fail this line, go on
      problem = std::string("internal error: ") + e.what();
    }
    r.record(kind, row[0] + ".npz", since(start), problem, got);
  }
  check_listing(r, kind, dir, *rows);
}

// regressions/: rpa check with the listed options gives the listed verdict.
void replay_regressions(Replay& r, const std::string& kind, const fs::path& dir) {
  const auto rows = expectations(r, kind, dir);
  if (!rows) return;
  for (const auto& row : *rows) {
    const auto start = std::chrono::steady_clock::now();
    const std::string file = (dir / (row[0] + ".npz")).string();
    std::vector<std::string> words;
    std::istringstream in(row[1]);
    for (std::string w; in >> w;) words.push_back(w);
    std::vector<std::string_view> argv(words.begin(), words.end());
    argv.push_back(file);
    CliArgs a;
    a.read = r.args->read;
    const std::string label = row[0] + ".npz" + (row[1].empty() ? "" : " " + row[1]);
    if (std::string err = parse_cli_args(argv, kCheckFlags, a); !err.empty()) {
      r.record(kind, label, 0.0, "expectations.tsv: the options '" + row[1] + "': " + err, "");
      continue;
    }
    CheckOutcome o;
    try {
      o = check_file(a);
    } catch (const std::exception& e) {  // a bug in rpa: fail this line, go on
      r.record(kind, label, since(start), std::string("internal error: ") + e.what(), "");
      continue;
    }
    const std::string got(verdict_name(o.verdict));
    std::string note = got;
    if (o.compared()) note += ": " + o.findings.summary;
    if (!o.detail.empty()) note += ": " + o.detail;
    r.record(kind, label, since(start),
             got == row[2] ? "" : "got " + note + ", expected " + row[2], note);
  }
  check_listing(r, kind, dir, *rows);
}

// A seed that runs longer than this is a failure (a hang), not the end of the replay.
constexpr unsigned kChildSeconds = 120;

// Runs body on bytes in a child process; returns "" or what went wrong (the first line the
// target wrote on stdout or stderr, and how the child ended).
std::string run_in_child(int (*body)(const uint8_t*, size_t), const std::vector<char>& bytes) {
  int fds[2];
  if (pipe(fds) != 0) return std::string("pipe: ") + std::strerror(errno);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return std::string("fork: ") + std::strerror(errno);
  }
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[1]);
    alarm(kChildSeconds);  // SIGALRM's default action ends the child
    // A heap copy of exactly the file's size, as fuzz/replay_main.cc makes.
    const std::unique_ptr<uint8_t[]> data(new uint8_t[bytes.size()]);
    std::copy(bytes.begin(), bytes.end(), data.get());
    const int rc = body(data.get(), bytes.size());
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(rc == 0 ? 0 : 1);
  }
  close(fds[1]);
  std::string said;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    said.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  pid_t waited;
  while ((waited = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  if (waited < 0) return std::string("waitpid: ") + std::strerror(errno);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  std::string how =
      !WIFSIGNALED(status)             ? "exit " + std::to_string(WEXITSTATUS(status))
      : WTERMSIG(status) == SIGALRM ? "still running after " + std::to_string(kChildSeconds) + " s"
                                    : "killed by signal " + std::to_string(WTERMSIG(status));
  std::istringstream lines(said);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) return how + ": " + line;
  }
  return how;
}

// fuzz/<target>/: every file through the target.
void replay_fuzz_target(Replay& r, const fuzz::Target& target, const fs::path& dir) {
  const std::string kind = "fuzz/" + std::string(target.name);
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) r.record(kind, "(seeds)", 0.0, dir.string() + " holds no seeds", "");
  for (const fs::path& f : files) {
    const auto start = std::chrono::steady_clock::now();
    std::ifstream in(f, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
    const std::string problem =
        !in.is_open() || in.bad() ? "cannot read it" : run_in_child(target.body, bytes);
    r.record(kind, f.filename().string(), since(start), problem,
             std::to_string(bytes.size()) + " bytes");
  }
}

const fuzz::Target* find_target(const std::string& name) {
  for (const fuzz::Target& t : fuzz::kTargets) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// One folder named on the command line; false when it is no corpus folder.
bool replay_dir(Replay& r, const fs::path& dir) {
  const std::string base = fs::path(dir).lexically_normal().filename().empty()
                               ? fs::path(dir).lexically_normal().parent_path().filename().string()
                               : fs::path(dir).lexically_normal().filename().string();
  if (base == "modes" || base == "findings") {
    replay_modes(r, base, dir);
  } else if (base == "regressions") {
    replay_regressions(r, base, dir);
  } else if (const fuzz::Target* t = find_target(base)) {
    replay_fuzz_target(r, *t, dir);
  } else if (base == "fuzz") {
    for (const fuzz::Target& each : fuzz::kTargets) {
      if (fs::is_directory(dir / each.name)) {
        replay_fuzz_target(r, each, dir / each.name);
      } else {
        r.record("fuzz", std::string(each.name), 0.0, "no seed folder " + (dir / each.name).string(), "");
      }
    }
    // A seed folder of a target that harness/targets.h does not list would go unreplayed.
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (e.is_directory() && !find_target(name)) {
        r.record("fuzz", name, 0.0, "a seed folder of no target in harness/targets.h", "");
      }
    }
  } else if (fs::is_directory(dir / "modes") || fs::is_directory(dir / "findings") ||
             fs::is_directory(dir / "regressions") || fs::is_directory(dir / "fuzz")) {
    for (const char* sub : {"modes", "findings", "regressions", "fuzz"}) {
      if (fs::is_directory(dir / sub)) replay_dir(r, dir / sub);
    }
  } else {
    return false;
  }
  return true;
}

}  // namespace

int replay_command(const std::vector<std::string_view>& args) {
  CliArgs a;
  if (std::string err = parse_cli_args(args, {"--junit", "--max-bytes", "--target"}, a,
                                       /*many_paths=*/true);
      !err.empty()) {
    return usage_error(err == "no case file given" ? "replay needs a corpus folder" : err);
  }
  for (const std::string& p : a.paths) {
    std::error_code ec;
    if (!fs::is_directory(p, ec)) return usage_error("replay: " + p + " is not a folder");
  }
  Replay r;
  r.args = &a;
  for (const std::string& p : a.paths) {
    if (!replay_dir(r, p)) {
      return usage_error("replay: " + p +
                         " is no corpus folder (modes/, findings/, regressions/, fuzz/, "
                         "fuzz/<target>/, or a corpus/ holding them)");
    }
  }
  std::printf("rpa replay: %zu cases: %zu passed, %d failed\n", r.cases.size(),
              r.cases.size() - static_cast<size_t>(r.failed), r.failed);
  if (!a.junit.empty()) {
    if (const std::string err = write_junit(a.junit, "rpa replay", r.cases); !err.empty()) {
      std::fprintf(stderr, "rpa: %s\n", err.c_str());
      return kExitUnreadable;
    }
  }
  return r.failed ? kExitMismatch : kExitOk;
}

}  // namespace rpa
