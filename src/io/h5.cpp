#include "io/h5.hpp"

#include "core/error.hpp"

#include <hdf5.h>

#include <cstring>
#include <numeric>

namespace burst::io {

namespace {

// Quiet HDF5's own error printing once: we report failures ourselves.
void silence_hdf5() {
  static bool done = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)done;
}

template <class T> hid_t mem_type();
template <> hid_t mem_type<float>() { return H5T_NATIVE_FLOAT; }
template <> hid_t mem_type<double>() { return H5T_NATIVE_DOUBLE; }
template <> hid_t mem_type<std::int32_t>() { return H5T_NATIVE_INT32; }
template <> hid_t mem_type<std::int64_t>() { return H5T_NATIVE_INT64; }
template <> hid_t mem_type<std::uint8_t>() { return H5T_NATIVE_UINT8; }
template <> hid_t mem_type<std::uint16_t>() { return H5T_NATIVE_UINT16; }
template <> hid_t mem_type<bf16>() { return H5T_NATIVE_UINT16; }

template <class T> const char* type_label() {
  if (std::is_same_v<T, float>) return "float32";
  if (std::is_same_v<T, double>) return "float64";
  if (std::is_same_v<T, std::int32_t>) return "int32";
  if (std::is_same_v<T, std::int64_t>) return "int64";
  if (std::is_same_v<T, std::uint8_t>) return "uint8";
  if (std::is_same_v<T, std::uint16_t>) return "uint16";
  return "bfloat16";
}

// RAII for hid_t handles of any kind.
struct Handle {
  hid_t id;
  herr_t (*closer)(hid_t);
  Handle(hid_t i, herr_t (*c)(hid_t)) : id(i), closer(c) {}
  ~Handle() {
    if (id >= 0) closer(id);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  operator hid_t() const { return id; }
};

hid_t open_object(hid_t file, const std::string& obj) { return H5Oopen(file, obj.empty() ? "/" : obj.c_str(), H5P_DEFAULT); }

}  // namespace

std::string hdf5_version() {
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
  return std::to_string(maj) + "." + std::to_string(min) + "." + std::to_string(rel);
}

H5File::H5File(const std::string& path, Mode mode) : path_(path) {
  silence_hdf5();
  hid_t id = -1;
  if (mode == Mode::Create) {
    id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    BURST_CHECK_IO(id >= 0, "cannot create HDF5 file '", path, "' (is the directory there and writable?)");
  } else {
    BURST_CHECK_IO(H5Fis_hdf5(path.c_str()) > 0, "'", path, "' is not an HDF5 file (missing, unreadable or another format)");
    id = H5Fopen(path.c_str(), mode == Mode::Read ? H5F_ACC_RDONLY : H5F_ACC_RDWR, H5P_DEFAULT);
    BURST_CHECK_IO(id >= 0, "cannot open HDF5 file '", path, "'", mode == Mode::Read ? "" : " for writing");
  }
  id_ = id;
}

H5File::~H5File() { close(); }

H5File::H5File(H5File&& o) noexcept : path_(std::move(o.path_)), id_(o.id_) { o.id_ = -1; }

H5File& H5File::operator=(H5File&& o) noexcept {
  if (this != &o) {
    close();
    path_ = std::move(o.path_);
    id_ = o.id_;
    o.id_ = -1;
  }
  return *this;
}

void H5File::close() {
  if (id_ >= 0) H5Fclose(id_);
  id_ = -1;
}

void H5File::flush() {
  BURST_CHECK_IO(id_ >= 0, "flush of a closed HDF5 file '", path_, "'");
  H5Fflush(id_, H5F_SCOPE_GLOBAL);
}

bool H5File::exists(const std::string& name) const {
  // Walk the path so a missing intermediate group is "false", not an error.
  size_t pos = 0;
  while (true) {
    pos = name.find('/', pos + 1);
    std::string part = name.substr(0, pos);
    if (!part.empty() && part != "/" && H5Lexists(id_, part.c_str(), H5P_DEFAULT) <= 0) return false;
    if (pos == std::string::npos) return true;
  }
}

void H5File::create_group(const std::string& name) {
  if (exists(name)) return;
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl, 1);
  Handle g(H5Gcreate2(id_, name.c_str(), lcpl, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  BURST_CHECK_IO(g.id >= 0, "cannot create group '", name, "' in '", path_, "'");
}

Dims H5File::dims(const std::string& dataset) const {
  BURST_CHECK_IO(exists(dataset), "'", path_, "' has no dataset '", dataset, "'");
  Handle d(H5Dopen2(id_, dataset.c_str(), H5P_DEFAULT), H5Dclose);
  BURST_CHECK_IO(d.id >= 0, "'", dataset, "' in '", path_, "' is not a dataset");
  Handle s(H5Dget_space(d), H5Sclose);
  int rank = H5Sget_simple_extent_ndims(s);
  std::vector<hsize_t> h(rank > 0 ? rank : 0);
  if (rank > 0) H5Sget_simple_extent_dims(s, h.data(), nullptr);
  return Dims(h.begin(), h.end());
}

std::string H5File::dtype(const std::string& dataset) const {
  BURST_CHECK_IO(exists(dataset), "'", path_, "' has no dataset '", dataset, "'");
  Handle d(H5Dopen2(id_, dataset.c_str(), H5P_DEFAULT), H5Dclose);
  BURST_CHECK_IO(d.id >= 0, "'", dataset, "' in '", path_, "' is not a dataset");
  if (has_attr(dataset, "dtype") && attr_string(dataset, "dtype") == "bfloat16") return "bfloat16";
  Handle t(H5Dget_type(d), H5Tclose);
  H5T_class_t c = H5Tget_class(t);
  size_t size = H5Tget_size(t);
  if (c == H5T_FLOAT) return size == 4 ? "float32" : size == 8 ? "float64" : "other";
  if (c == H5T_INTEGER) {
    bool is_signed = H5Tget_sign(t) == H5T_SGN_2;
    if (is_signed && size == 4) return "int32";
    if (is_signed && size == 8) return "int64";
    if (!is_signed && size == 1) return "uint8";
    if (!is_signed && size == 2) return "uint16";
    return "other";
  }
  if (c == H5T_STRING) return "string";
  return "other";
}

template <class T> void H5File::write(const std::string& name, const T* data, const Dims& dims) {
  BURST_CHECK_IO(id_ >= 0, "write of '", name, "' to a closed HDF5 file");
  std::vector<hsize_t> h(dims.begin(), dims.end());
  Handle space(H5Screate_simple(static_cast<int>(h.size()), h.data(), nullptr), H5Sclose);
  if (exists(name)) {
    BURST_CHECK_IO(H5Ldelete(id_, name.c_str(), H5P_DEFAULT) >= 0, "cannot replace '", name, "' in '", path_, "'");
  }
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl, 1);
  Handle d(H5Dcreate2(id_, name.c_str(), mem_type<T>(), space, lcpl, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
  BURST_CHECK_IO(d.id >= 0, "cannot create dataset '", name, "' in '", path_, "'");
  std::uint64_t n = std::accumulate(dims.begin(), dims.end(), std::uint64_t(1), std::multiplies<>());
  if (n > 0) {
    BURST_CHECK_IO(H5Dwrite(d, mem_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0, "cannot write dataset '", name,
                   "' to '", path_, "' (disk full?)");
  }
  if constexpr (std::is_same_v<T, bf16>) set_attr(name, "dtype", std::string("bfloat16"));
}

template <class T> std::vector<T> H5File::read(const std::string& name, Dims* out_dims) const {
  Dims dm = dims(name);
  const std::string stored = dtype(name);
  if constexpr (std::is_same_v<T, bf16>) {
    BURST_CHECK_IO(stored == "bfloat16", "dataset '", name, "' in '", path_, "' holds ", stored, ", not bfloat16");
  } else {
    BURST_CHECK_IO(stored != "bfloat16", "dataset '", name, "' in '", path_,
                   "' holds bfloat16 (uint16 bits); read it as bf16 and convert");
    BURST_CHECK_IO(stored != "string" && stored != "other", "dataset '", name, "' in '", path_, "' holds ", stored,
                   ", not numbers");
  }
  std::uint64_t n = std::accumulate(dm.begin(), dm.end(), std::uint64_t(1), std::multiplies<>());
  std::vector<T> out(n);
  Handle d(H5Dopen2(id_, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (n > 0) {
    BURST_CHECK_IO(H5Dread(d, mem_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) >= 0, "cannot read dataset '",
                   name, "' from '", path_, "' as ", type_label<T>());
  }
  if (out_dims) *out_dims = dm;
  return out;
}

#define BURST_H5_INSTANTIATE(T)                                                     \
  template void H5File::write<T>(const std::string&, const T*, const Dims&);        \
  template std::vector<T> H5File::read<T>(const std::string&, Dims*) const;
BURST_H5_INSTANTIATE(float)
BURST_H5_INSTANTIATE(double)
BURST_H5_INSTANTIATE(std::int32_t)
BURST_H5_INSTANTIATE(std::int64_t)
BURST_H5_INSTANTIATE(std::uint8_t)
BURST_H5_INSTANTIATE(std::uint16_t)
BURST_H5_INSTANTIATE(bf16)
#undef BURST_H5_INSTANTIATE

// ------------------------------------------------------------- attributes

namespace {
Handle open_for_attr(hid_t file, const std::string& obj, const std::string& path) {
  hid_t o = open_object(file, obj);
  BURST_CHECK_IO(o >= 0, "'", path, "' has no object '", obj, "' to hold an attribute");
  return Handle(o, H5Oclose);
}

void replace_attr(hid_t o, const std::string& name) {
  if (H5Aexists(o, name.c_str()) > 0) H5Adelete(o, name.c_str());
}
}  // namespace

void H5File::set_attr(const std::string& obj, const std::string& name, const std::string& value) {
  Handle o = open_for_attr(id_, obj, path_);
  replace_attr(o, name);
  Handle t(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(t, value.empty() ? 1 : value.size());
  H5Tset_strpad(t, H5T_STR_NULLPAD);
  Handle s(H5Screate(H5S_SCALAR), H5Sclose);
  Handle a(H5Acreate2(o, name.c_str(), t, s, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  BURST_CHECK_IO(a.id >= 0, "cannot create attribute '", name, "' on '", obj, "' in '", path_, "'");
  std::string buf = value.empty() ? std::string(1, '\0') : value;
  H5Awrite(a, t, buf.data());
}

template <class T> static void set_scalar_attr(hid_t file, const std::string& path, const std::string& obj,
                                               const std::string& name, T value, hid_t type) {
  Handle o = open_for_attr(file, obj, path);
  replace_attr(o, name);
  Handle s(H5Screate(H5S_SCALAR), H5Sclose);
  Handle a(H5Acreate2(o, name.c_str(), type, s, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  BURST_CHECK_IO(a.id >= 0, "cannot create attribute '", name, "' on '", obj, "' in '", path, "'");
  H5Awrite(a, type, &value);
}

void H5File::set_attr(const std::string& obj, const std::string& name, double value) {
  set_scalar_attr(id_, path_, obj, name, value, H5T_NATIVE_DOUBLE);
}
void H5File::set_attr(const std::string& obj, const std::string& name, std::int64_t value) {
  set_scalar_attr(id_, path_, obj, name, value, H5T_NATIVE_INT64);
}

bool H5File::has_attr(const std::string& obj, const std::string& name) const {
  if (!obj.empty() && obj != "/" && !exists(obj)) return false;
  Handle o(open_object(id_, obj), H5Oclose);
  return o.id >= 0 && H5Aexists(o, name.c_str()) > 0;
}

std::string H5File::attr_string(const std::string& obj, const std::string& name) const {
  BURST_CHECK_IO(has_attr(obj, name), "'", path_, "': '", obj, "' has no attribute '", name, "'");
  Handle o(open_object(id_, obj), H5Oclose);
  Handle a(H5Aopen(o, name.c_str(), H5P_DEFAULT), H5Aclose);
  Handle t(H5Aget_type(a), H5Tclose);
  BURST_CHECK_IO(H5Tget_class(t) == H5T_STRING, "attribute '", name, "' of '", obj, "' in '", path_, "' is not a string");
  if (H5Tis_variable_str(t) > 0) {
    char* p = nullptr;
    Handle mt(H5Tget_native_type(t, H5T_DIR_ASCEND), H5Tclose);
    H5Aread(a, mt, &p);
    std::string s = p ? p : "";
    H5free_memory(p);
    return s;
  }
  size_t n = H5Tget_size(t);
  std::string s(n, '\0');
  H5Aread(a, t, s.data());
  s.resize(std::strlen(s.c_str()));
  return s;
}

template <class T> static T get_scalar_attr(hid_t file, const std::string& path, const std::string& obj,
                                            const std::string& name, hid_t type) {
  Handle o(open_object(file, obj), H5Oclose);
  BURST_CHECK_IO(o.id >= 0 && H5Aexists(o, name.c_str()) > 0, "'", path, "': '", obj, "' has no attribute '", name, "'");
  Handle a(H5Aopen(o, name.c_str(), H5P_DEFAULT), H5Aclose);
  Handle t(H5Aget_type(a), H5Tclose);
  H5T_class_t c = H5Tget_class(t);
  BURST_CHECK_IO(c == H5T_INTEGER || c == H5T_FLOAT, "attribute '", name, "' of '", obj, "' in '", path, "' is not a number");
  T v{};
  H5Aread(a, type, &v);
  return v;
}

double H5File::attr_double(const std::string& obj, const std::string& name) const {
  return get_scalar_attr<double>(id_, path_, obj, name, H5T_NATIVE_DOUBLE);
}
std::int64_t H5File::attr_int(const std::string& obj, const std::string& name) const {
  return get_scalar_attr<std::int64_t>(id_, path_, obj, name, H5T_NATIVE_INT64);
}

}  // namespace burst::io
