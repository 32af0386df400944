// h5_compare A.h5 DATASET_A B.h5 DATASET_B RTOL: compares two datasets as
// Hugging Face's golden test does, ||a - b|| / ||b|| (and prints the largest
// elementwise difference); exit 0 when the shapes agree and the relative
// error is at most RTOL.
#include "io/h5.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: h5_compare A.h5 DATASET_A B.h5 DATASET_B RTOL\n");
    return 2;
  }
  try {
    burst::io::Dims da, db;
    const auto a = burst::io::H5File::open(argv[1]).read<double>(argv[2], &da);
    const auto b = burst::io::H5File::open(argv[3]).read<double>(argv[4], &db);
    if (da != db) {
      std::fprintf(stderr, "h5_compare: shapes differ (%zu vs %zu dimensions, %zu vs %zu values)\n", da.size(), db.size(),
                   a.size(), b.size());
      return 1;
    }
    double num = 0, den = 0, worst = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
      worst = std::fmax(worst, std::fabs(a[i] - b[i]));
    }
    const double rel = std::sqrt(num / std::fmax(den, 1e-300)), tol = std::atof(argv[5]);
    std::printf("h5_compare: %s:%s vs %s:%s, %zu values: relative error %.3e (tolerance %.1e), max |a - b| %.3e\n", argv[1],
                argv[2], argv[3], argv[4], a.size(), rel, tol, worst);
    return std::isfinite(rel) && rel <= tol ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "h5_compare: %s\n", e.what());
    return 1;
  }
}
