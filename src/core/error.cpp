#include "smelt/error.h"

#include "smelt/scalar.h"

namespace smelt {
namespace detail {
void throw_error(const std::string& msg) { throw Error(msg); }
void throw_internal(const char* file, int line, const std::string& msg) {
  throw Error(fmt::format("internal error (a bug in smelt, please report it) at {}:{}: {}", file,
                          line, msg));
}
}  // namespace detail

std::string Scalar::str() const {
  switch (kind_) {
    case Kind::Bool: return i_ ? "True" : "False";
    case Kind::Int: return std::to_string(i_);
    case Kind::Float: return fmt::format("{}", d_);
  }
  return "";
}

}  // namespace smelt
