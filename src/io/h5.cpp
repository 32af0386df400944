#include "io/h5.hpp"

#include "core/error.hpp"

#include <hdf5.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <new>
#include <numeric>

namespace burst::io {

namespace {

// Set when a file could not be closed (HDF5 1.10 leaves such a file half
// torn down, and H5close at exit then crashes on it): the library is left
// to the operating system at exit instead.
std::atomic<bool> g_file_abandoned{false};

void close_library_at_exit() {
  if (!g_file_abandoned.load()) H5close();
}

// Once, before any other HDF5 call: quiet HDF5's own error printing (we
// report failures ourselves), and close the library at exit ourselves.
void init_hdf5() {
  static bool done = [] {
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    std::atexit(close_library_at_exit);
    return true;
  }();
  (void)done;
}

herr_t collect_error(unsigned, const H5E_error2_t* e, void* out) {
  auto* v = static_cast<std::vector<std::string>*>(out);
  v->push_back(e->desc ? e->desc : "");
  return 0;
}

// The POSIX descriptor of a file HDF5 opened with its default (sec2)
// driver, or -1 (another driver: nothing to do at this level).
int sec2_descriptor(hid_t file) {
  const hid_t fapl = H5Fget_access_plist(file);
  if (fapl < 0) return -1;
  void* handle = nullptr;
  const bool ok = H5Pget_driver(fapl) == H5FD_SEC2 && H5Fget_vfd_handle(file, fapl, &handle) >= 0 && handle != nullptr;
  H5Pclose(fapl);
  return ok ? *static_cast<int*>(handle) : -1;
}

// Disk space for every byte HDF5 has allocated in the file (its end of
// allocation), before a flush writes the cached data and metadata there:
// "" when reserved or when the file system cannot reserve (the flush is
// then the test), else the cause (no space, quota, file size limit).
std::string reserve_space(hid_t file) {
#if defined(__linux__)
  const int fd = sec2_descriptor(file);
  hsize_t size = 0;
  struct stat st;
  if (fd < 0 || H5Fget_filesize(file, &size) < 0 || size == 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return "";
  int rc = 0;
  do rc = ::fallocate(fd, 0, 0, off_t(size));
  while (rc != 0 && errno == EINTR);
  // Only a lack of space is the flush's failure foretold; any other refusal
  // (no fallocate on this file system, EPERM from a sandbox's seccomp
  // filter, a FUSE mount) means the space cannot be reserved ahead, and the
  // flush itself is then the test.
  if (rc != 0 && (errno == ENOSPC || errno == EDQUOT || errno == EFBIG)) return std::strerror(errno);
  return "";
#else
  (void)file;
  return "";
#endif
}

// process_memory_limit's measure, taken anew (files and system calls);
// without the address-space limit, host_memory_limit's.
std::uint64_t measure_memory_limit(bool address_space = true) {
  std::uint64_t m = 0;
  const auto at_most = [&](std::uint64_t v) {
    if (v > 0 && (m == 0 || v < m)) m = v;
  };
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGE_SIZE)
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) at_most(std::uint64_t(pages) * std::uint64_t(page));
#endif
  for (const char* f : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    if (FILE* in = std::fopen(f, "r")) {
      unsigned long long v = 0;
      if (std::fscanf(in, "%llu", &v) == 1) at_most(v);  // "max" (no limit) reads as nothing
      std::fclose(in);
    }
  }
  struct rlimit as;
  if (address_space && getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) at_most(std::uint64_t(as.rlim_cur));
  return m;
}

}  // namespace

// Measured once: a checkpoint or weights file is read a dataset at a time,
// and the limits do not change under a running process in practice.
std::uint64_t process_memory_limit() {
  static const std::uint64_t limit = measure_memory_limit();  // thread-safe initialisation (C++11)
  return limit;
}

std::uint64_t host_memory_limit() {
  static const std::uint64_t limit = measure_memory_limit(false);
  return limit;
}

namespace {

// After a failed write: what HDF5 still holds for the file goes to an
// anonymous memory file instead, so that H5Fclose completes and frees the
// file's state; the file on disk keeps what was written before.
bool divert_writes(hid_t file) {
#if defined(__linux__)
  const int fd = sec2_descriptor(file);
  if (fd < 0) return false;
  const int m = memfd_create("burst-h5-discarded", MFD_CLOEXEC);
  if (m < 0) return false;
  const bool ok = dup2(m, fd) >= 0;
  ::close(m);
  return ok;
#else
  (void)file;
  return false;
#endif
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

std::string hdf5_error_cause() {
  std::vector<std::string> descs;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_error, &descs);
  // The sec2 driver's message carries the system's: "..., errno = 28, error message = 'No space left on device', ...".
  for (auto it = descs.rbegin(); it != descs.rend(); ++it) {
    const std::string key = "error message = '";
    const size_t a = it->find(key);
    if (a == std::string::npos) continue;
    const size_t b = it->find('\'', a + key.size());
    if (b != std::string::npos) return it->substr(a + key.size(), b - a - key.size());
  }
  for (auto it = descs.rbegin(); it != descs.rend(); ++it)
    if (!it->empty()) return "HDF5: " + *it;
  return "HDF5 gave no reason";
}

std::string dims_string(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

std::string hdf5_version() {
  init_hdf5();
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
  return std::to_string(maj) + "." + std::to_string(min) + "." + std::to_string(rel);
}

H5File::H5File(const std::string& path, Mode mode) : path_(path), writable_(mode != Mode::Read) {
  init_hdf5();
  hid_t id = -1;
  if (mode == Mode::Create) {
    // The 1.8 file format at the least: version-2 object headers and
    // superblock carry checksums, so a damaged header (a flipped bit on the
    // disk, a torn copy) is an HDF5 error on reading, not a parse of garbage
    // (with the 1.0 format's headers a damaged checkpoint's root header
    // crashed H5Aexists). Readable by HDF5 1.8 and later (h5py included).
    Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
    BURST_CHECK_IO(fapl.id >= 0 && H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_V18) >= 0,
                   "cannot set the HDF5 file format for '", path, "': ", hdf5_error_cause());
    id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    BURST_CHECK_IO(id >= 0, "cannot create HDF5 file '", path, "': ", hdf5_error_cause(),
                   " (is the directory there and writable, with room?)");
  } else {
    BURST_CHECK_IO(H5Fis_hdf5(path.c_str()) > 0, "'", path, "' is not an HDF5 file (missing, unreadable or another format)");
    id = H5Fopen(path.c_str(), mode == Mode::Read ? H5F_ACC_RDONLY : H5F_ACC_RDWR, H5P_DEFAULT);
    BURST_CHECK_IO(id >= 0, "cannot open HDF5 file '", path, "'", mode == Mode::Read ? "" : " for writing", " (",
                   hdf5_error_cause(), ")");
  }
  id_ = id;
}

namespace {
// A destructor cannot throw: a file that could not be completed there is
// said on stderr (unless an error is already on its way out).
void warn_incomplete(const std::string& path, const std::string& why) {
  if (why.empty() || std::uncaught_exceptions() > 0) return;
  std::fprintf(stderr, "burst: warning: HDF5 file '%s' is incomplete: %s\n", path.c_str(), why.c_str());
  std::fflush(stderr);
}
}  // namespace

H5File::~H5File() { warn_incomplete(path_, close_file()); }

H5File::H5File(H5File&& o) noexcept
    : path_(std::move(o.path_)), id_(o.id_), writable_(o.writable_), flush_failed_(o.flush_failed_),
      failed_(std::move(o.failed_)) {
  o.id_ = -1;
}

H5File& H5File::operator=(H5File&& o) noexcept {
  if (this != &o) {
    warn_incomplete(path_, close_file());
    path_ = std::move(o.path_);
    id_ = o.id_;
    writable_ = o.writable_;
    flush_failed_ = o.flush_failed_;
    failed_ = std::move(o.failed_);
    o.id_ = -1;
  }
  return *this;
}

std::string H5File::close_file() noexcept {
  if (id_ < 0) return "";
  std::string why = failed_;
  if (flush_failed_) {
    g_file_abandoned = true;  // HDF5 cannot close it: left to the operating system
  } else {
    if (writable_ && why.empty()) why = reserve_space(id_);
    if (!why.empty()) divert_writes(id_);
    // Fails when even the diversion cannot take the writes (a file size
    // limit holds for the memory file too): the file is then abandoned.
    if (H5Fclose(id_) < 0) {
      g_file_abandoned = true;
      if (why.empty()) why = hdf5_error_cause();
    }
  }
  id_ = -1;
  flush_failed_ = false;
  failed_.clear();
  return why;
}

void H5File::close() {
  const std::string why = close_file();
  BURST_CHECK_IO(why.empty(), "cannot write HDF5 file '", path_, "': ", why, " (the file is incomplete)");
}

void H5File::flush() {
  BURST_CHECK_IO(id_ >= 0, "flush of a closed HDF5 file '", path_, "'");
  BURST_CHECK_IO(failed_.empty(), "cannot write HDF5 file '", path_, "': ", failed_, " (the file is incomplete)");
  const std::string no_space = reserve_space(id_);
  if (!no_space.empty()) {
    failed_ = no_space;
    BURST_FAIL(ErrorKind::IO, "cannot write HDF5 file '", path_, "': ", no_space, " (the file keeps what was written before)");
  }
  if (H5Fflush(id_, H5F_SCOPE_GLOBAL) < 0) {
    failed_ = hdf5_error_cause();
    flush_failed_ = true;
    BURST_FAIL(ErrorKind::IO, "cannot write HDF5 file '", path_, "': ", failed_, " (the file is incomplete)");
  }
}

void H5File::fail_write(const std::string& what) { write_failed(what, hdf5_error_cause()); }

void H5File::write_failed(const std::string& what, const std::string& cause) {
  if (writable_ && failed_.empty()) failed_ = cause;  // a write to a file opened for reading changed nothing
  BURST_FAIL(ErrorKind::IO, what, " in '", path_, "': ", cause);
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

bool H5File::is_dataset(const std::string& name) const {
  if (name.empty() || !exists(name)) return false;
  const hid_t o = H5Oopen(id_, name.c_str(), H5P_DEFAULT);
  if (o < 0) return false;
  const bool dataset = H5Iget_type(o) == H5I_DATASET;
  H5Oclose(o);
  return dataset;
}

void H5File::create_group(const std::string& name) {
  if (exists(name)) return;
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl, 1);
  Handle g(H5Gcreate2(id_, name.c_str(), lcpl, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  if (g.id < 0) fail_write("cannot create group '" + name + "'");
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
    if (size == 1 || size == 2 || size == 4 || size == 8)  // every width HDF5 converts to the others
      return (is_signed ? "int" : "uint") + std::to_string(8 * size);
    return "other";
  }
  if (c == H5T_STRING) return "string";
  return "other";
}

template <class T> void H5File::write(const std::string& name, const T* data, const Dims& dims) {
  BURST_CHECK_IO(id_ >= 0, "write of '", name, "' to a closed HDF5 file");
  std::vector<hsize_t> h(dims.begin(), dims.end());
  Handle space(H5Screate_simple(static_cast<int>(h.size()), h.data(), nullptr), H5Sclose);
  if (exists(name) && H5Ldelete(id_, name.c_str(), H5P_DEFAULT) < 0) fail_write("cannot replace '" + name + "'");
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl, 1);
  Handle d(H5Dcreate2(id_, name.c_str(), mem_type<T>(), space, lcpl, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
  if (d.id < 0) fail_write("cannot create dataset '" + name + "'");
  std::uint64_t n = std::accumulate(dims.begin(), dims.end(), std::uint64_t(1), std::multiplies<>());
  if (n > 0 && H5Dwrite(d, mem_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
    fail_write("cannot write dataset '" + name + "'");
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
  // The values a declared shape needs: a damaged or wrong file can declare
  // [2^40] (or an overflowing product) in a few bytes.
  std::uint64_t n = 1;
  bool overflow = false;
  for (std::uint64_t e : dm) {
    if (e != 0 && n > std::numeric_limits<std::uint64_t>::max() / e) overflow = true;
    n *= e;
  }
  overflow = overflow || n > std::numeric_limits<std::uint64_t>::max() / sizeof(T) || n > std::vector<T>().max_size();
  BURST_CHECK_INPUT(!overflow, "dataset '", name, "' in '", path_, "' declares shape ", dims_string(dm),
                    ": more values than this process can address (a damaged or wrong file?)");
  const std::uint64_t bytes = n * sizeof(T);
  // More than the memory this process may have is refused before the allocation: with
  // overcommit (vm.overcommit_memory = 1) an impossible size does not throw
  // bad_alloc, zero-filling it gets the process killed instead.
  const std::uint64_t phys = process_memory_limit();
  BURST_CHECK_INPUT(phys == 0 || bytes <= phys, "dataset '", name, "' in '", path_, "' declares shape ", dims_string(dm),
                    ": reading it needs ", bytes, " bytes (", n, " x ", type_label<T>(), "), more than the ", phys,
                    " bytes of memory this process may use (a damaged or wrong file?)");
  std::vector<T> out;
  try {
    out.resize(n);
  } catch (const std::bad_alloc&) {
    BURST_FAIL(ErrorKind::Input, "dataset '", name, "' in '", path_, "' declares shape ", dims_string(dm), ": reading it needs ",
               bytes, " bytes (", n, " x ", type_label<T>(), "), more than this process can allocate (a damaged or wrong file?)");
  }
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
  if (a.id < 0) fail_write("cannot create attribute '" + name + "' on '" + obj + "'");
  std::string buf = value.empty() ? std::string(1, '\0') : value;
  if (H5Awrite(a, t, buf.data()) < 0) fail_write("cannot write attribute '" + name + "' on '" + obj + "'");
}

template <class T> void H5File::set_scalar_attr(const std::string& obj, const std::string& name, T value, long long type) {
  Handle o = open_for_attr(id_, obj, path_);
  replace_attr(o, name);
  Handle s(H5Screate(H5S_SCALAR), H5Sclose);
  Handle a(H5Acreate2(o, name.c_str(), hid_t(type), s, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (a.id < 0) fail_write("cannot create attribute '" + name + "' on '" + obj + "'");
  if (H5Awrite(a, hid_t(type), &value) < 0) fail_write("cannot write attribute '" + name + "' on '" + obj + "'");
}

void H5File::set_attr(const std::string& obj, const std::string& name, double value) {
  set_scalar_attr(obj, name, value, H5T_NATIVE_DOUBLE);
}
void H5File::set_attr(const std::string& obj, const std::string& name, std::int64_t value) {
  set_scalar_attr(obj, name, value, H5T_NATIVE_INT64);
}

bool H5File::has_attr(const std::string& obj, const std::string& name) const {
  if (!obj.empty() && obj != "/" && !exists(obj)) return false;
  // An object that is there but cannot be opened, or whose attributes cannot
  // be listed, is a damaged file (a header failing its checksum), not a
  // missing attribute: Error(IO), so that a damaged checkpoint is told from
  // a file that is not one (and --resume falls back past it).
  Handle o(open_object(id_, obj), H5Oclose);
  BURST_CHECK_IO(o.id >= 0, "'", path_, "': cannot read the header of '", obj.empty() ? "/" : obj, "' (a damaged file? ",
                 hdf5_error_cause(), ")");
  const htri_t there = H5Aexists(o, name.c_str());
  BURST_CHECK_IO(there >= 0, "'", path_, "': cannot read the attributes of '", obj.empty() ? "/" : obj,
                 "' (a damaged file? ", hdf5_error_cause(), ")");
  return there > 0;
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
