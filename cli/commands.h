// The rpa subcommands (DESIGN.md section 8). Each takes the arguments after its name and
// returns the process exit code.
#pragma once

#include <string_view>
#include <vector>

namespace rpa {

int validate_command(const std::vector<std::string_view>& args);
int run_command(const std::vector<std::string_view>& args);
int check_command(const std::vector<std::string_view>& args);
int bench_command(const std::vector<std::string_view>& args);
int gen_command(const std::vector<std::string_view>& args);
int campaign_command(const std::vector<std::string_view>& args);
int replay_command(const std::vector<std::string_view>& args);
int merge_command(const std::vector<std::string_view>& args);

}  // namespace rpa
