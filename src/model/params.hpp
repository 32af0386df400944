// Parameters in one flat buffer per role (weights, gradients, optimizer
// moments) with a table of Hugging Face names, shapes and offsets. Flat
// buffers are what ZeRO shards and what the optimizer walks; the table gives
// each tensor its unmanaged 1-D / 2-D view.
#pragma once

#include "core/memory.hpp"
#include "core/views.hpp"
#include "model/config.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace burst {

struct ParamInfo {
  std::string name;          // Hugging Face name, e.g. model.layers.0.self_attn.q_proj.weight
  std::vector<long> shape;   // [out, in] for matrices, [n] for norms
  long offset = 0, size = 0;
  bool is_norm = false;      // no weight decay, initialised to 1
};

// The table for a model, in a fixed order (embedding, layers, final norm, head).
std::vector<ParamInfo> llama_param_table(const ModelConfig& c);

template <class T, class Mem = DeviceMem> class FlatTensors {
 public:
  using Unmanaged1 = Kokkos::View<T*, Layout, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using Unmanaged2 = Kokkos::View<T**, Layout, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

  FlatTensors() = default;
  FlatTensors(const std::vector<ParamInfo>& table, MemCategory cat, const std::string& name)
      : table_(table), data_(mem_label(cat, name), total_size(table)) {}

  const std::vector<ParamInfo>& table() const { return table_; }
  Kokkos::View<T*, Layout, Mem> flat() const { return data_; }
  long size() const { return long(data_.extent(0)); }
  const ParamInfo& info(const std::string& name) const;
  Unmanaged1 vec(const std::string& name) const {
    const ParamInfo& p = info(name);
    return Unmanaged1(data_.data() + p.offset, p.size);
  }
  Unmanaged2 mat(const std::string& name) const {
    const ParamInfo& p = info(name);
    return Unmanaged2(data_.data() + p.offset, p.shape[0], p.shape.size() > 1 ? p.shape[1] : 1);
  }

  static long total_size(const std::vector<ParamInfo>& t) { return t.empty() ? 0 : t.back().offset + t.back().size; }

 private:
  std::vector<ParamInfo> table_;
  Kokkos::View<T*, Layout, Mem> data_;
};

template <class T, class Mem> const ParamInfo& FlatTensors<T, Mem>::info(const std::string& name) const {
  for (auto& p : table_)
    if (p.name == name) return p;
  BURST_FAIL(ErrorKind::Internal, "no parameter named '", name, "'");
}

// Deterministic initialisation: N(0, std) for matrices, 1 for norms; each
// tensor has its own stream seeded by (seed, tensor index), so the values do
// not depend on how many ranks hold the model.
template <class T, class Mem> void init_params(FlatTensors<T, Mem>& p, std::uint64_t seed, double std);

}  // namespace burst
