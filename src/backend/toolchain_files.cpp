// File reading for the toolchains and the kernel cache (toolchain_files.h).
#include "backend/toolchain_files.h"

#include <fstream>
#include <sstream>

namespace smelt::backend {

std::string read_file(const std::string& path, bool* ok) {
  std::ifstream f(path, std::ios::binary);
  if (ok) *ok = static_cast<bool>(f);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace smelt::backend
