// MPI-aware GoogleTest main: every rank runs every test; rank 0 prints the
// usual report, other ranks print only their failures (prefixed with the
// rank); the exit status is non-zero if any rank failed.
#include "comm/runtime.hpp"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>

namespace {
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?", r.line_number(),
                 r.summary());
  }

 private:
  int rank_;
};
}  // namespace

int main(int argc, char** argv) {
  // Buffers allocated without initialisation start as NaN in every test
  // binary, however it is launched (core/views.hpp: uninit_view).
  setenv("BURST_POISON", "1", 0);
  ::testing::InitGoogleTest(&argc, argv);
  int rc = 1;
  {
    burst::Runtime rt(&argc, &argv);
    if (rt.rank() != 0) {
      auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
      delete listeners.Release(listeners.default_result_printer());
      listeners.Append(new RankFailurePrinter(rt.rank()));
    }
    int local = RUN_ALL_TESTS();
    MPI_Allreduce(&local, &rc, 1, MPI_INT, MPI_MAX, rt.world());
  }
  return rc;
}
