// Versions of every dependency the engine was built and runs with.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace burst {

// (name, version) pairs; run-time versions where the library reports one.
std::vector<std::pair<std::string, std::string>> dependency_versions();

}  // namespace burst
