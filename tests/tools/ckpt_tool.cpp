// ckpt_tool: make damaged or foreign checkpoints for the CLI tests.
//   ckpt_tool flip FILE DATASET          flip a byte of DATASET's raw data
//   ckpt_tool set-int FILE ATTR VALUE    set an integer attribute on "/"
//   ckpt_tool write-ints FILE DATASET V...  a new file with a 1-D int32 dataset
//   ckpt_tool declare FILE DATASET TYPE D0 [D1...]  add a chunked dataset (TYPE int32 or
//                                        float64) of that shape to FILE (created if
//                                        missing) with no data written: a few bytes that
//                                        declare, say, [2^40] values
//   ckpt_tool reshape FILE DATASET D0 [D1...]  replace DATASET by a float32 dataset of
//                                        that shape (zeros, written, no checksum): a whole
//                                        file whose tensor has the wrong shape
#include "tools/corrupt.hpp"

#include <hdf5.h>

#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "flip" && argc == 4) {
    const std::string err = burst::test_tools::flip_dataset_byte(argv[2], argv[3]);
    if (!err.empty()) std::fprintf(stderr, "ckpt_tool: %s\n", err.c_str());
    return err.empty() ? 0 : 1;
  }
  if (cmd == "set-int" && argc == 5) {
    hid_t f = H5Fopen(argv[2], H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0) return 1;
    if (H5Aexists(f, argv[3]) > 0) H5Adelete(f, argv[3]);
    long long v = std::atoll(argv[4]);
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, argv[3], H5T_NATIVE_INT64, s, H5P_DEFAULT, H5P_DEFAULT);
    herr_t ok = H5Awrite(a, H5T_NATIVE_LLONG, &v);
    H5Aclose(a), H5Sclose(s), H5Fclose(f);
    return ok < 0 ? 1 : 0;
  }
  if (cmd == "write-ints" && argc >= 4) {
    std::vector<int> v;
    for (int i = 4; i < argc; ++i) v.push_back(std::atoi(argv[i]));
    hid_t f = H5Fcreate(argv[2], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0) return 1;
    hsize_t n = v.size();
    hid_t s = H5Screate_simple(1, &n, nullptr);
    hid_t d = H5Dcreate2(f, argv[3], H5T_STD_I32LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t ok = H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
    H5Dclose(d), H5Sclose(s), H5Fclose(f);
    return ok < 0 ? 1 : 0;
  }
  if (cmd == "declare" && argc >= 6) {
    const std::string type = argv[4];
    if (type != "int32" && type != "float64") return 2;
    std::vector<hsize_t> dims, chunk;
    for (int i = 5; i < argc; ++i) dims.push_back(hsize_t(std::strtoull(argv[i], nullptr, 10)));
    for (size_t i = 0; i < dims.size(); ++i) chunk.push_back(i + 1 == dims.size() ? std::min<hsize_t>(dims[i], 1024) : 1);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    hid_t f = H5Fis_hdf5(argv[2]) > 0 ? H5Fopen(argv[2], H5F_ACC_RDWR, H5P_DEFAULT)
                                      : H5Fcreate(argv[2], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0) return 1;
    hid_t s = H5Screate_simple(int(dims.size()), dims.data(), nullptr);
    hid_t p = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(p, int(chunk.size()), chunk.data());
    hid_t d = H5Dcreate2(f, argv[3], type == "int32" ? H5T_STD_I32LE : H5T_IEEE_F64LE, s, H5P_DEFAULT, p, H5P_DEFAULT);
    const bool ok = d >= 0;
    if (ok) H5Dclose(d);
    H5Pclose(p), H5Sclose(s);
    return H5Fclose(f) >= 0 && ok ? 0 : 1;
  }
  if (cmd == "reshape" && argc >= 5) {
    std::vector<hsize_t> dims;
    hsize_t n = 1;
    for (int i = 4; i < argc; ++i) dims.push_back(hsize_t(std::strtoull(argv[i], nullptr, 10))), n *= dims.back();
    hid_t f = H5Fopen(argv[2], H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0) return 1;
    if (H5Lexists(f, argv[3], H5P_DEFAULT) > 0) H5Ldelete(f, argv[3], H5P_DEFAULT);
    const std::vector<float> zeros(n, 0.0f);
    hid_t s = H5Screate_simple(int(dims.size()), dims.data(), nullptr);
    hid_t d = H5Dcreate2(f, argv[3], H5T_IEEE_F32LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const bool ok = d >= 0 && H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, zeros.data()) >= 0;
    if (d >= 0) H5Dclose(d);
    H5Sclose(s);
    return H5Fclose(f) >= 0 && ok ? 0 : 1;
  }
  std::fprintf(stderr, "usage: ckpt_tool flip FILE DATASET | ckpt_tool set-int FILE ATTR VALUE | ckpt_tool write-ints FILE DATASET V... | ckpt_tool declare FILE DATASET TYPE D0 [D1...] | ckpt_tool reshape FILE DATASET D0 [D1...]\n");
  return 2;
}
