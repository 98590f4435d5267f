// Errors for bad input. Library code validates its arguments and throws std::invalid_argument with
// a message naming the argument, its value and the accepted range; the CLI prints that message on
// one line and exits with code 2. UsageError is the same thing raised by the CLI and config layers.
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace recall {

class UsageError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Throws std::invalid_argument("<what>") unless ok. Use for argument checks in the library.
inline void check_arg(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

}  // namespace recall
