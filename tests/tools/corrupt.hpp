// Damage a checkpoint on purpose, for the tests of checksums and fallback:
// flip one byte of a dataset's raw data in place, where HDF5 stored it, so
// the file stays a readable HDF5 file and only the checksum can tell.
#pragma once

#include <hdf5.h>

#include <cstdio>
#include <string>

namespace burst::test_tools {

// Returns an empty string on success, else what went wrong.
inline std::string flip_dataset_byte(const std::string& file, const std::string& dataset) {
  haddr_t offset = HADDR_UNDEF;
  {
    hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return "cannot open " + file;
    hid_t d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
    if (d >= 0) offset = H5Dget_offset(d), H5Dclose(d);  // contiguous datasets only, as checkpoints are
    H5Fclose(f);
  }
  if (offset == HADDR_UNDEF) return "no contiguous dataset " + dataset + " in " + file;
  FILE* fp = std::fopen(file.c_str(), "r+b");
  if (!fp) return "cannot write " + file;
  std::fseek(fp, long(offset), SEEK_SET);
  int c = std::fgetc(fp);
  std::fseek(fp, long(offset), SEEK_SET);
  std::fputc(c ^ 0x40, fp);
  std::fclose(fp);
  return "";
}

}  // namespace burst::test_tools
