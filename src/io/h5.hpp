// A small HDF5 layer over the serial C API (works with serial and parallel
// HDF5 builds alike). Named datasets of float32/float64/int32/int64/uint8/
// uint16 and bf16 (stored as uint16 with the attribute dtype = "bfloat16"),
// attributes, and intermediate groups created on demand ("a/b/c").
// Failures throw burst::Error(IO) naming the file and the object.
//
// Writing: HDF5 caches data and metadata and writes much of a file only at
// flush() or close(), so a full disk may show only there. A file written to
// is complete once close() (or flush()) returns; when it cannot be (disk
// full, quota, file size limit, I/O error, an earlier failed write) they
// throw Error(IO) naming the file and the cause ("No space left on device"),
// the file on disk is incomplete (it keeps what the last successful flush
// wrote), and the handle is closed all the same. Before HDF5 flushes, the
// space for every byte it has allocated in the file is reserved
// (fallocate), so a full disk is found before the flush and HDF5 never
// fails one (HDF5 1.10 cannot close a file whose flush failed and crashed
// at exit tearing it down). The destructor closes without throwing: code
// that writes a file calls close() to learn whether it is complete.
#pragma once

#include "core/bf16.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace burst::io {

using Dims = std::vector<std::uint64_t>;

class H5File {
 public:
  enum class Mode { Read, ReadWrite, Create /* truncate */ };
  H5File() = default;
  H5File(const std::string& path, Mode mode);
  ~H5File();
  H5File(H5File&& o) noexcept;
  H5File& operator=(H5File&& o) noexcept;
  H5File(const H5File&) = delete;
  H5File& operator=(const H5File&) = delete;

  static H5File create(const std::string& path) { return H5File(path, Mode::Create); }
  static H5File open(const std::string& path, Mode mode = Mode::Read) { return H5File(path, mode); }

  const std::string& path() const { return path_; }
  bool is_open() const { return id_ >= 0; }
  long long id() const { return id_; }
  // Writes what HDF5 holds for the file to it (Error(IO) as close() when it cannot).
  void flush();
  // Completes and closes the file (a no-op when closed); see the header.
  void close();
  // For writers that call HDF5 on id() themselves (the run log): records a
  // failed write (the file is then incomplete, close() reports it) and
  // throws Error(IO) "<what> in '<file>': <cause>". Take `cause` from
  // hdf5_error_cause() right after the failing call.
  [[noreturn]] void write_failed(const std::string& what, const std::string& cause);

  bool exists(const std::string& name) const;  // dataset or group
  bool is_dataset(const std::string& name) const;  // exists, and a dataset (not a group)
  Dims dims(const std::string& dataset) const;
  // "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
  // "uint32", "uint64", "bfloat16", "string", or "other".
  std::string dtype(const std::string& dataset) const;

  template <class T> void write(const std::string& name, const T* data, const Dims& dims);
  template <class T> void write(const std::string& name, const std::vector<T>& data, const Dims& dims) {
    write(name, data.data(), dims);
  }
  template <class T> void write(const std::string& name, const std::vector<T>& data) {
    write(name, data.data(), Dims{data.size()});
  }
  // Reads a dataset converting to T when the stored type is another number
  // type (HDF5 converts); bf16 is read only from datasets stored as bf16.
  // A declared shape whose values cannot be held (the element count
  // overflows, or the allocation fails: a damaged or wrong file declaring
  // [2^40]) is Error(Input) naming the file, the dataset, the shape and the
  // bytes; callers that know the shape they expect check dims() first.
  template <class T> std::vector<T> read(const std::string& name, Dims* dims = nullptr) const;

  // Attributes on the file root ("/"), a group or a dataset.
  void set_attr(const std::string& obj, const std::string& name, const std::string& value);
  void set_attr(const std::string& obj, const std::string& name, double value);
  void set_attr(const std::string& obj, const std::string& name, std::int64_t value);
  void set_attr(const std::string& obj, const std::string& name, int value) { set_attr(obj, name, std::int64_t(value)); }
  bool has_attr(const std::string& obj, const std::string& name) const;
  std::string attr_string(const std::string& obj, const std::string& name) const;
  double attr_double(const std::string& obj, const std::string& name) const;
  std::int64_t attr_int(const std::string& obj, const std::string& name) const;

  void create_group(const std::string& name);

 private:
  template <class T> void set_scalar_attr(const std::string& obj, const std::string& name, T value, long long type);
  std::string close_file() noexcept;  // "" or why the file is incomplete
  [[noreturn]] void fail_write(const std::string& what);
  std::string path_;
  long long id_ = -1;  // hid_t
  bool writable_ = false;
  bool flush_failed_ = false;  // HDF5 cannot close it any more: left open
  std::string failed_;         // the first failed write's cause ("" = none)
};

// What HDF5's error stack says went wrong, innermost first: the system's
// message when a read or write failed ("No space left on device"), else
// HDF5's description. Call it right after the failing call (the next
// HDF5 call clears the stack).
std::string hdf5_error_cause();

// The memory this process may have, in bytes, 0 if unknown: the machine's
// physical memory, or less where a container's memory limit (cgroup v2
// memory.max, v1 memory.limit_in_bytes) or RLIMIT_AS says so. Measured on
// the first call; H5File::read refuses a declared dataset size above it.
std::uint64_t process_memory_limit();
// The same without RLIMIT_AS (which binds each process alone): what the
// processes of this host (or container) share, 0 if unknown.
std::uint64_t host_memory_limit();

// "[2, 3]".
std::string dims_string(const Dims& d);

// The HDF5 library version, "1.10.8".
std::string hdf5_version();

}  // namespace burst::io
