// Where the test programs find the sources and the recall binary. The paths are compiled into one
// file (tests/test_paths.cpp) rather than into every test: the other files then compile to the same
// bytes in any checkout, so a compiler cache shared between checkouts (.ci/run) serves them.
#pragma once
#include <string>

namespace recall::test {
const std::string& source_dir();     // the repository's root
const std::string& recall_binary();  // the recall binary of this build
}  // namespace recall::test
