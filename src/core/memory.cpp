#include "core/memory.hpp"

#include "core/env.hpp"
#include "core/error.hpp"
#include "core/kokkos_compat.hpp"

#include "core/views.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifdef KOKKOS_ENABLE_CUDA
#include <cuda_runtime.h>
#endif

namespace burst {

bool poison_uninitialized() {
  // A debugging switch: 1 / 0 (or unset); anything else is named rather than taken as "on".
  static const bool on = env_switch("BURST_POISON", false, "1 (poison) or 0");
  return on;
}

namespace {
constexpr const char* kNames[kMemCategories] = {"params", "grads", "optim", "act", "comm", "work", "other"};

kx::AllocCallbacks g_previous;

MemSpaceKind space_kind(const kx::SpaceHandle& h) {
  // Kokkos names host spaces "Host" (and "HBW" etc.); everything else
  // (Cuda, CudaUVM, CudaHostPinned counts as device-visible) is device.
  return std::strncmp(h.name, "Host", 4) == 0 ? MemSpaceKind::Host : MemSpaceKind::Device;
}

void allocate_cb(const kx::SpaceHandle h, const char* label, const void* ptr, const std::uint64_t size) {
  MemoryTracker::global().on_allocate(space_kind(h), label ? label : "", static_cast<std::int64_t>(size));
  if (g_previous.allocate) g_previous.allocate(h, label, ptr, size);
}

void deallocate_cb(const kx::SpaceHandle h, const char* label, const void* ptr, const std::uint64_t size) {
  MemoryTracker::global().on_deallocate(space_kind(h), label ? label : "", static_cast<std::int64_t>(size));
  if (g_previous.deallocate) g_previous.deallocate(h, label, ptr, size);
}
}  // namespace

const char* mem_category_name(MemCategory c) { return kNames[static_cast<int>(c)]; }

MemCategory mem_category_of_label(const std::string& label) {
  auto slash = label.find('/');
  if (slash == std::string::npos) return MemCategory::Other;
  for (int i = 0; i < kMemCategories - 1; ++i)
    if (label.compare(0, slash, kNames[i]) == 0) return static_cast<MemCategory>(i);
  return MemCategory::Other;
}

std::string mem_label(MemCategory c, const std::string& name) { return std::string(mem_category_name(c)) + "/" + name; }

MemoryTracker& MemoryTracker::global() {
  static MemoryTracker t;
  return t;
}

void MemoryTracker::install() {
  if (installed_) return;
  g_previous = kx::current_alloc_callbacks();
  kx::set_alloc_callbacks({allocate_cb, deallocate_cb});
  installed_ = true;
}

void MemoryTracker::uninstall() {
  if (!installed_) return;
  kx::set_alloc_callbacks(g_previous);
  g_previous = {};
  installed_ = false;
}

void MemoryTracker::on_allocate(MemSpaceKind space, const std::string& label, std::int64_t bytes) {
  const int c = static_cast<int>(mem_category_of_label(label));
  std::lock_guard<std::mutex> lock(mu_);
  auto& k = c_[static_cast<int>(space)];
  k.current[c] += bytes;
  k.current_total += bytes;
  k.allocations += 1;
  if (k.current[c] > k.peak[c]) k.peak[c] = k.current[c];
  if (k.current_total > k.peak_total) k.peak_total = k.current_total;
}

void MemoryTracker::on_deallocate(MemSpaceKind space, const std::string& label, std::int64_t bytes) {
  const int c = static_cast<int>(mem_category_of_label(label));
  std::lock_guard<std::mutex> lock(mu_);
  auto& k = c_[static_cast<int>(space)];
  k.current[c] -= bytes;
  k.current_total -= bytes;
}

MemCounters MemoryTracker::counters(MemSpaceKind space) const {
  std::lock_guard<std::mutex> lock(mu_);
  return c_[static_cast<int>(space)];
}

std::int64_t MemoryTracker::current(MemSpaceKind space, MemCategory c) const {
  return counters(space).current[static_cast<int>(c)];
}

std::int64_t MemoryTracker::peak(MemSpaceKind space, MemCategory c) const {
  return counters(space).peak[static_cast<int>(c)];
}

void MemoryTracker::reset_peaks() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& k : c_) {
    k.peak = k.current;
    k.peak_total = k.current_total;
  }
}

std::string format_bytes(std::int64_t bytes) {
  char buf[64];
  const double b = static_cast<double>(bytes);
  if (bytes < 0) std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  else if (b < 1024.0) std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  else if (b < 1024.0 * 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024);
  else if (b < 1024.0 * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1024.0 * 1024));
  else std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  return buf;
}

std::string MemoryTracker::report(MemSpaceKind space) const {
  auto k = counters(space);
  std::string out;
  for (int i = 0; i < kMemCategories; ++i) {
    if (k.peak[i] == 0) continue;
    out += std::string(kNames[i]) + " " + format_bytes(k.current[i]) + " (peak " + format_bytes(k.peak[i]) + ")\n";
  }
  out += "total " + format_bytes(k.current_total) + " (peak " + format_bytes(k.peak_total) + ")\n";
  return out;
}

#ifdef KOKKOS_ENABLE_CUDA
namespace {
// The device's default pool when Kokkos allocates from it (patch 05 on, not
// turned off by KOKKOS_CUDA_MALLOC_ASYNC=0).
bool pool_in_use(cudaMemPool_t* pool) {
  if (!cuda_malloc_async_switch()) return false;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetDefaultMemPool(pool, dev) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return true;
}
}  // namespace
#endif

std::int64_t device_pool_reserved_high() {
#ifdef KOKKOS_ENABLE_CUDA
  cudaMemPool_t pool;
  unsigned long long high = 0;
  if (!pool_in_use(&pool)) return -1;
  if (cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &high) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return static_cast<std::int64_t>(high);
#else
  return -1;
#endif
}

void device_pool_reset_high() {
#ifdef KOKKOS_ENABLE_CUDA
  cudaMemPool_t pool;
  unsigned long long zero = 0;
  if (pool_in_use(&pool) && cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero) != cudaSuccess)
    cudaGetLastError();
#endif
}

}  // namespace burst
