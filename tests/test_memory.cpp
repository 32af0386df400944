#include "core/memory.hpp"
#include "core/views.hpp"

#include <gtest/gtest.h>

#include <cmath>

using namespace burst;

namespace {
MemSpaceKind device_kind() {
  return std::is_same<DeviceMem, Kokkos::HostSpace>::value ? MemSpaceKind::Host : MemSpaceKind::Device;
}
}  // namespace

TEST(MemoryTracker, LabelsMapToCategories) {
  EXPECT_EQ(mem_category_of_label("params/model.embed_tokens.weight"), MemCategory::Params);
  EXPECT_EQ(mem_category_of_label("grads/x"), MemCategory::Grads);
  EXPECT_EQ(mem_category_of_label("optim/m"), MemCategory::Optimizer);
  EXPECT_EQ(mem_category_of_label("act/h"), MemCategory::Activations);
  EXPECT_EQ(mem_category_of_label("comm/kv_buffer"), MemCategory::Comm);
  EXPECT_EQ(mem_category_of_label("work/gemm"), MemCategory::Workspace);
  EXPECT_EQ(mem_category_of_label("paramsx/y"), MemCategory::Other);
  EXPECT_EQ(mem_category_of_label("no_slash"), MemCategory::Other);
  EXPECT_EQ(mem_label(MemCategory::Comm, "kv"), "comm/kv");
}

TEST(MemoryTracker, CountsViewAllocationsExactly) {
  auto& t = MemoryTracker::global();
  ASSERT_TRUE(t.installed());
  const auto k = device_kind();
  const auto p0 = t.current(k, MemCategory::Params), g0 = t.current(k, MemCategory::Grads);
  t.reset_peaks();
  {
    View2<float> w(mem_label(MemCategory::Params, "w"), 100, 30);
    View1<double> b(mem_label(MemCategory::Params, "b"), 7);
    EXPECT_EQ(t.current(k, MemCategory::Params) - p0, 100 * 30 * 4 + 7 * 8);
    {
      // Kokkos rounds each view allocation up to a multiple of 8 bytes
      // (ViewMapping::allocate_shared): 420 bytes of bf16 take 424.
      View3<bf16> g(mem_label(MemCategory::Grads, "g"), 5, 6, 7);
      EXPECT_EQ(t.current(k, MemCategory::Grads) - g0, 424);
    }
    EXPECT_EQ(t.current(k, MemCategory::Grads), g0);
    EXPECT_EQ(t.peak(k, MemCategory::Grads) - g0, 424);
    // Views that share an allocation count once.
    auto alias = w;
    auto sub = Kokkos::subview(w, 3, Kokkos::ALL());
    (void)alias, (void)sub;
    EXPECT_EQ(t.current(k, MemCategory::Params) - p0, 100 * 30 * 4 + 7 * 8);
  }
  EXPECT_EQ(t.current(k, MemCategory::Params), p0);
  EXPECT_EQ(t.peak(k, MemCategory::Params) - p0, 100 * 30 * 4 + 7 * 8);
  t.reset_peaks();
  EXPECT_EQ(t.peak(k, MemCategory::Params), p0);
  EXPECT_NE(t.report(k).find("total"), std::string::npos);
}

TEST(MemoryTracker, HostMirrorsCountInHostSpace) {
  auto& t = MemoryTracker::global();
  const auto a0 = t.current(MemSpaceKind::Host, MemCategory::Activations);
  HView1<float> h(mem_label(MemCategory::Activations, "h"), 1000);
  EXPECT_EQ(t.current(MemSpaceKind::Host, MemCategory::Activations) - a0, 4000);
}

TEST(MemoryTracker, FormatsBytes) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(3 * 1024 * 1024), "3.0 MiB");
}

// Every test binary runs with BURST_POISON=1 (tests/test_main.cpp), so every buffer
// the model allocates without initialisation starts as NaN: a kernel that
// reads an element nobody wrote makes the model tests fail.
TEST(Poison, UninitializedViewsArePoisonedUnderTheTestSuite) {
  ASSERT_TRUE(burst::poison_uninitialized()) << "the tests must run with BURST_POISON=1";
  auto f = burst::uninit_view<burst::View2<float>>("act/poison_f", 3, 5);
  auto d = burst::uninit_view<burst::View1<double>>("act/poison_d", 7);
  auto b = burst::uninit_view<burst::View1<burst::bf16>>("act/poison_b", 4);
  auto hf = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), f);
  auto hd = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), d);
  auto hb = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), b);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) EXPECT_TRUE(std::isnan(hf(i, j)));
  for (int i = 0; i < 7; ++i) EXPECT_TRUE(std::isnan(hd(i)));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(std::isnan(float(hb(i))));
}
