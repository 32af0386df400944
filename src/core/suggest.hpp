// "Did you mean" for a misspelt name: the config schema's keys and sections,
// the keys of a cluster file.
#pragma once

#include <string>
#include <vector>

namespace burst {

// "; did you mean 'x'?" for the first closest of `candidates` to `name` (1
// to 3 edits, at most half the name wrong), or "" when none is that close.
std::string did_you_mean(const std::string& name, const std::vector<std::string>& candidates);

}  // namespace burst
