// A command's --model: a preset name, or a Hugging Face config.json (a
// path with a '/', an existing regular file, or a name ending in .json: a
// missing one is then "cannot open", not "unknown preset"; a directory
// named 7B beside the user is not the 7B preset's config).
#pragma once

#include "model/config.hpp"

#include <filesystem>
#include <string>

namespace burst::cli {

inline ModelConfig model_from_arg(const std::string& m) {
  std::error_code ec;
  const bool is_file = m.find('/') != std::string::npos || std::filesystem::is_regular_file(m, ec) ||
                       (m.size() > 5 && m.compare(m.size() - 5, 5, ".json") == 0);
  return is_file ? model_from_hf_file(m) : model_preset(m);
}

}  // namespace burst::cli
