// HDF5 token datasets: a 1-D integer dataset of token ids and, optionally,
// a 1-D integer dataset of document start offsets (ascending, from 0; the
// total length may close the list).
#pragma once

#include "data/token_files.hpp"

#include <string>

namespace burst::data {

// offsets == "": one document. offsets_required: a missing offsets dataset
// is an error (the user named it) rather than one document.
TokenCorpus open_h5_tokens(const std::string& path, const std::string& dataset, const std::string& offsets,
                           bool offsets_required, long vocab);

}  // namespace burst::data
