// case_echo IN.npz OUT.npz: reads a case and writes it back, the C++ half of
// tools/test_rpa_case.py's round trip. A read error exits like the rpa CLI does on
// malformed input (3, the error line on stderr); a write error exits 1.
#include <cstdio>
#include <string>

#include "casefile/case_file.h"
#include "cli/exit_codes.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: case_echo IN.npz OUT.npz\n");
    return rpa::kExitUsage;
  }
  const rpa::CaseReadResult read = rpa::read_case_file(argv[1], rpa::CaseReadOptions{});
  if (!read.value.has_value()) {
    std::fprintf(stderr, "%s\n", read.error.c_str());
    return rpa::kExitUnreadable;
  }
  std::string error;
  if (!rpa::write_case_file(argv[2], *read.value, &error)) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  return 0;
}
