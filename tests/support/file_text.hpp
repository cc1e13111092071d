// file_text: the bytes of a file, for tests that check what was (or was not) written.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

inline std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}
