#include "data/h5_tokens.hpp"

#include "core/error.hpp"
#include "core/text_file.hpp"
#include "io/h5.hpp"

#include <hdf5.h>

namespace burst::data {

namespace {
// Integer datasets of any width and sign (h5.hpp names only some of them).
bool is_integer_dataset(const io::H5File& f, const std::string& name) {
  const hid_t d = H5Dopen2(hid_t(f.id()), name.c_str(), H5P_DEFAULT);
  if (d < 0) return false;
  const hid_t t = H5Dget_type(d);
  const bool ok = H5Tget_class(t) == H5T_INTEGER;
  H5Tclose(t);
  H5Dclose(d);
  return ok;
}

std::vector<std::int64_t> read_ints(const io::H5File& f, const std::string& path, const std::string& name, const char* what) {
  BURST_CHECK_INPUT(f.is_dataset(name), "HDF5 tokens file '", path, "': ", what, " '", name,
                    "' is not a dataset (a group?)");
  BURST_CHECK_INPUT(is_integer_dataset(f, name), "HDF5 tokens file '", path, "': ", what, " dataset '", name, "' holds ",
                    f.dtype(name), ", not integers");
  const io::Dims d = f.dims(name);  // before the values: a wrong file is named, not allocated
  BURST_CHECK_INPUT(d.size() == 1, "HDF5 tokens file '", path, "': ", what, " dataset '", name, "' must be 1-D, it has ",
                    d.size(), " dimensions");
  return f.read<std::int64_t>(name);  // a declared size beyond memory: Error(Input) naming it (io/h5.hpp)
}
}  // namespace

TokenCorpus open_h5_tokens(const std::string& path, const std::string& dataset, const std::string& offsets,
                           bool offsets_required, long vocab) {
  const std::string problem = input_file_problem("HDF5 tokens file", path);
  BURST_CHECK_INPUT(problem.empty(), problem);
  io::H5File f;
  try {
    f = io::H5File::open(path);
  } catch (const Error& e) {
    BURST_FAIL(ErrorKind::Input, "HDF5 tokens file '", path, "' cannot be read: ", e.message());
  }
  BURST_CHECK_INPUT(f.exists(dataset), "HDF5 tokens file '", path, "' has no dataset '", dataset, "' (data.dataset)");
  const std::vector<std::int64_t> raw = read_ints(f, path, dataset, "token");
  BURST_CHECK_INPUT(!raw.empty(), "HDF5 tokens file '", path, "': dataset '", dataset, "' is empty");
  std::vector<std::uint32_t> tokens(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    BURST_CHECK_INPUT(raw[i] >= 0 && raw[i] < vocab, "HDF5 tokens file '", path, "': token id ", raw[i], " at index ", i,
                      " of '", dataset, "' is not in the model's vocabulary [0, ", vocab, ")");
    tokens[i] = std::uint32_t(raw[i]);
  }
  std::vector<long> starts;
  if (!offsets.empty() && f.exists(offsets)) {
    for (std::int64_t o : read_ints(f, path, offsets, "document offsets")) starts.push_back(long(o));
    BURST_CHECK_INPUT(!starts.empty(), "HDF5 tokens file '", path, "': document offsets '", offsets, "' are empty");
  } else {
    BURST_CHECK_INPUT(!offsets_required || offsets.empty(), "HDF5 tokens file '", path, "' has no dataset '", offsets,
                      "' (data.offsets)");
  }
  return TokenCorpus::from_tokens(std::move(tokens), std::move(starts), vocab,
                                  "HDF5 tokens file '" + path + "' (" + dataset + (offsets.empty() ? "" : ", " + offsets) + ")");
}

}  // namespace burst::data
