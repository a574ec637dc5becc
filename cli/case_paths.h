// The case files a command is pointed at: each file named, and every .npz below each
// directory named (recursively, sorted), in the order given.
#pragma once

#include <string>
#include <vector>

namespace rpa {

struct CasePath {
  std::string path;
  std::string error;  // nonempty: the path does not exist or a directory could not be read
};

std::vector<CasePath> case_files(const std::vector<std::string>& paths);

// Whether any of paths is a directory (a command then works in its many-case form).
bool any_directory(const std::vector<std::string>& paths);

}  // namespace rpa
