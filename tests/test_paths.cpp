#include "test_paths.h"

namespace recall::test {
const std::string& source_dir() {
  static const std::string dir = RECALL_SOURCE_DIR;
  return dir;
}
const std::string& recall_binary() {
  static const std::string path = RECALL_BINARY;
  return path;
}
}  // namespace recall::test
