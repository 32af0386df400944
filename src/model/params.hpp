// Parameters in one flat buffer per role (weights, gradients, optimizer
// moments) with a table of Hugging Face names, shapes and offsets. Flat
// buffers are what ZeRO shards and what the optimizer walks; the table gives
// each tensor its unmanaged 1-D / 2-D view.
#pragma once

#include "core/memory.hpp"
#include "core/error.hpp"
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
  int unit = 0;              // the embedding (0), layer i (i + 1), the final norm and head (layers + 1)
};

// A unit: the consecutive tensors that are used together (ZeRO gathers and
// reduces a unit at a time).
struct UnitInfo {
  long begin = 0, size = 0;
};
std::vector<UnitInfo> param_units(const std::vector<ParamInfo>& table);

// The table for a model, in a fixed order (embedding, layers, final norm, head).
std::vector<ParamInfo> llama_param_table(const ModelConfig& c);

template <class T, class Mem = DeviceMem> class FlatTensors {
 public:
  using Unmanaged1 = Kokkos::View<T*, Layout, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using Unmanaged2 = Kokkos::View<T**, Layout, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

  FlatTensors() = default;
  FlatTensors(const std::vector<ParamInfo>& table, MemCategory cat, const std::string& name)
      : table_(table), units_(param_units(table)), data_(mem_label(cat, name), total_size(table)) {}
  // Unit mode (ZeRO): no flat buffer; each unit's tensors live in a buffer of
  // their own, present between set_unit and drop_unit.
  static FlatTensors per_unit(const std::vector<ParamInfo>& table) {
    FlatTensors t;
    t.table_ = table;
    t.units_ = param_units(table);
    t.unit_data_.resize(t.units_.size());
    return t;
  }

  const std::vector<ParamInfo>& table() const { return table_; }
  const std::vector<UnitInfo>& units() const { return units_; }
  bool unit_mode() const { return !unit_data_.empty(); }
  // The flat buffer (not in unit mode).
  Kokkos::View<T*, Layout, Mem> flat() const {
    BURST_CHECK(!unit_mode(), ErrorKind::Internal, "flat() of tensors held per unit");
    return data_;
  }
  long size() const { return total_size(table_); }
  void set_unit(int u, Kokkos::View<T*, Layout, Mem> buf) { unit_data_[size_t(u)] = buf; }
  void drop_unit(int u) { unit_data_[size_t(u)] = Kokkos::View<T*, Layout, Mem>(); }
  Kokkos::View<T*, Layout, Mem> unit(int u) const { return unit_data_[size_t(u)]; }
  const ParamInfo& info(const std::string& name) const;
  Unmanaged1 vec(const std::string& name) const {
    const ParamInfo& p = info(name);
    return Unmanaged1(ptr(p), p.size);
  }
  Unmanaged2 mat(const std::string& name) const {
    const ParamInfo& p = info(name);
    return Unmanaged2(ptr(p), p.shape[0], p.shape.size() > 1 ? p.shape[1] : 1);
  }

  static long total_size(const std::vector<ParamInfo>& t) { return t.empty() ? 0 : t.back().offset + t.back().size; }

 private:
  T* ptr(const ParamInfo& p) const {
    if (!unit_mode()) return data_.data() + p.offset;
    const auto& buf = unit_data_[size_t(p.unit)];
    BURST_CHECK(buf.extent(0) > 0, ErrorKind::Internal, "tensor ", p.name, " used while its unit ", p.unit, " is not held");
    return buf.data() + (p.offset - units_[size_t(p.unit)].begin);
  }
  std::vector<ParamInfo> table_;
  std::vector<UnitInfo> units_;
  Kokkos::View<T*, Layout, Mem> data_;
  std::vector<Kokkos::View<T*, Layout, Mem>> unit_data_;  // unit mode
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
