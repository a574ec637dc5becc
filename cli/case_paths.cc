#include "cli/case_paths.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace rpa {

namespace fs = std::filesystem;

std::vector<CasePath> case_files(const std::vector<std::string>& paths) {
  std::vector<CasePath> out;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (!fs::is_directory(p, ec)) {
      if (fs::exists(p, ec)) {
        out.push_back({p, ""});
      } else {
        out.push_back({p, p + ": no such file or directory"});
      }
      continue;
    }
    std::vector<std::string> found;
    fs::recursive_directory_iterator it(p, fs::directory_options::skip_permission_denied, ec);
    for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      std::error_code type_ec;
      if (it->is_regular_file(type_ec) && it->path().extension() == ".npz") {
        found.push_back(it->path().string());
      }
    }
    if (ec) {
      out.push_back({p, p + ": cannot read the directory: " + ec.message()});
      continue;
    }
    std::sort(found.begin(), found.end());
    for (std::string& f : found) out.push_back({std::move(f), ""});
  }
  return out;
}

bool any_directory(const std::vector<std::string>& paths) {
  return std::any_of(paths.begin(), paths.end(), [](const std::string& p) {
    std::error_code ec;
    return fs::is_directory(p, ec);
  });
}

}  // namespace rpa
