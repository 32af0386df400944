// Memory tracker fed by the allocations themselves (Kokkos Tools allocation
// callbacks): bytes in use and peak per category and memory space. A view's
// category is the prefix of its label ("params/...", "grads/...", "optim/...",
// "act/...", "comm/...", "work/..."); views with other labels count as "other".
// Byte counts are deterministic, so tests may assert them.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>

namespace burst {

// Communication buffers (memory category comm) a method holds on one rank,
// from its plan and the shapes, not from the tracker: `persistent` for its
// lifetime (ring packets, allocated when it is made), `transient` at the
// peak of one call (all-to-all and all-gather buffers).
struct CommBuffers {
  std::int64_t persistent = 0, transient = 0;
};


enum class MemCategory : int { Params = 0, Grads, Optimizer, Activations, Comm, Workspace, Other, Count };
constexpr int kMemCategories = static_cast<int>(MemCategory::Count);

const char* mem_category_name(MemCategory c);
// "params/model.embed_tokens.weight" -> Params; unknown prefix -> Other.
MemCategory mem_category_of_label(const std::string& label);
// The label for a view of category c: mem_label(MemCategory::Grads, "x") == "grads/x".
std::string mem_label(MemCategory c, const std::string& name);

enum class MemSpaceKind : int { Host = 0, Device = 1 };

struct MemCounters {
  std::array<std::int64_t, kMemCategories> current{};
  std::array<std::int64_t, kMemCategories> peak{};
  std::int64_t current_total = 0;
  std::int64_t peak_total = 0;
  std::int64_t allocations = 0;
};

class MemoryTracker {
 public:
  static MemoryTracker& global();

  // Install the Kokkos Tools callbacks (after Kokkos::initialize). A tool
  // library loaded through KOKKOS_TOOLS_LIBS keeps receiving the events: we
  // chain to the callbacks that were there before us.
  void install();
  void uninstall();
  bool installed() const { return installed_; }

  void on_allocate(MemSpaceKind space, const std::string& label, std::int64_t bytes);
  void on_deallocate(MemSpaceKind space, const std::string& label, std::int64_t bytes);

  MemCounters counters(MemSpaceKind space) const;
  std::int64_t current(MemSpaceKind space, MemCategory c) const;
  std::int64_t peak(MemSpaceKind space, MemCategory c) const;
  // Start a new peak window (e.g. per step) at the current usage.
  void reset_peaks();
  // One line per category with non-zero peak: "params 1.2 MiB (peak 1.2 MiB)".
  std::string report(MemSpaceKind space) const;

 private:
  mutable std::mutex mu_;
  std::array<MemCounters, 2> c_{};
  bool installed_ = false;
};

std::string format_bytes(std::int64_t bytes);

// CUDA builds whose Kokkos draws from the device's stream-ordered memory
// pool (cmake/patches/kokkos-05): the most device memory the pool has held
// (reserved, cudaMemPoolAttrReservedMemHigh), which is what the process
// really took, fragmentation included; the tracker counts live views only.
// -1 on other builds or when the pool is not in use.
std::int64_t device_pool_reserved_high();
// Start a new high-water mark at what the pool holds now (no-op elsewhere).
void device_pool_reset_high();

}  // namespace burst
