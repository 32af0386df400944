// A small HDF5 layer over the serial C API (works with serial and parallel
// HDF5 builds alike). Named datasets of float32/float64/int32/int64/uint8/
// uint16 and bf16 (stored as uint16 with the attribute dtype = "bfloat16"),
// attributes, and intermediate groups created on demand ("a/b/c").
// Failures throw burst::Error(IO) naming the file and the object.
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
  void flush();
  void close();

  bool exists(const std::string& name) const;  // dataset or group
  Dims dims(const std::string& dataset) const;
  // "float32", "float64", "int32", "int64", "uint8", "uint16", "bfloat16", "string", or "other".
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
  std::string path_;
  long long id_ = -1;  // hid_t
};

// The HDF5 library version, "1.10.8".
std::string hdf5_version();

}  // namespace burst::io
