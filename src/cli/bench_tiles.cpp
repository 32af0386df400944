// `burst bench attention --set bench.tile_costs=true`: what the host
// attention kernel costs per tile beyond the arithmetic of a whole tile, on
// one rank, in CPU seconds of the process (the calibration's unit: rates per
// CPU-second). The distributed methods call the kernels with the general
// position mask (parallel/impl/block_meta.hpp), whose tiles come in three
// kinds (kernels/attention_host.hpp): skipped (the bound of
// kernels/attention_tiles.hpp over the tile's positions and documents says
// nothing is visible), whole (every pair visible: no per-element mask) and
// partly visible (computed in full, then masked element by element). Each
// configuration below makes every tile of a call one kind, by the positions
// and document ids it gives the mask:
//
//   none           AttnMask::none(): whole tiles, no mask work at all
//   causal_kind    AttnMask::causal(0) over one block (the call the
//                  calibration's attention rate is measured on)
//   general_whole  general causal mask, every key before every query, one
//                  document: every tile whole (the bound checks, no element mask)
//   partial_causal general causal, positions 0..31 in every tile: every tile
//                  a diagonal one (528 of 1024 pairs visible)
//   partial_window general window of 64, query positions 64 + (0..31), key
//                  positions 16 + (0..31): every tile cut by the window edge
//   partial_document general causal + same document, every key before every
//                  query, two documents of 16 slots in every tile
//   skip_<s>       general causal, every key after every query: every tile
//                  skipped, at s = S/8, S/4, S/2, S (queries = keys = s), so
//                  the calibration can split an all-skipped call into a fixed
//                  part, a part per row and a part per skipped tile
//
// Each configuration: the forward (flash_attention_forward) and the backward
// (flash_attention_backward, both passes; D computed once outside the timing)
// timed `bench.repeats` times after a warm-up, CPU clock, medians written
// with the tile counts (tiles x heads) of each kind.
#include "cli/bench_common.hpp"
#include "cli/bench_memory.hpp"
#include "core/timer.hpp"
#include "cli/commands.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "io/h5.hpp"
#include "io/h5_output.hpp"
#include "kernels/attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace burst::cli {

namespace {


struct TileConfig {
  std::string name;
  long s = 0;            // queries = keys
  std::string kind;      // none | causal | general
  bool causal = true, same_doc = false;
  long window = 0;
  std::vector<long> qpos, kpos;
  std::vector<int> qdoc, kdoc;
};

}  // namespace

int bench_attention_tiles(Runtime& rt, const Config& cfg, const std::string& output) {
  using Mem = DeviceMem;
  using MaskT = kernels::AttnMask<Mem>;
  const long n = cfg.get_int("bench.heads"), nkv = cfg.get_int("bench.kv_heads"), d = cfg.get_int("bench.head_dim");
  const int reps = int(cfg.get_int("bench.repeats"));
  const long S = cfg.get_int_list("bench.seq").at(0);
  const kernels::AttnTiles tiles;  // the engine's tiles (every engine call passes none)
  const long T = tiles.br;
  BURST_CHECK_CONFIG(tiles.br == tiles.bc, "bench.tile_costs assumes square tiles");
  BURST_CHECK_CONFIG(S % (8 * T) == 0, "bench.tile_costs: bench.seq[0] = ", S, " must be a multiple of 8 tiles (", 8 * T, ")");

  std::vector<TileConfig> cfgs;
  auto iota = [](long s, long off) {
    std::vector<long> p(static_cast<size_t>(s), 0L);
    for (long i = 0; i < s; ++i) p[size_t(i)] = off + i;
    return p;
  };
  auto periodic = [T](long s, long off) {
    std::vector<long> p(static_cast<size_t>(s), 0L);
    for (long i = 0; i < s; ++i) p[size_t(i)] = off + i % T;
    return p;
  };
  auto docs = [T](long s, bool split) {
    std::vector<int> v(static_cast<size_t>(s), 0);
    if (split)
      for (long i = 0; i < s; ++i) v[size_t(i)] = int((i % T) / (T / 2));
    return v;
  };
  {
    TileConfig c;
    c.name = "none", c.s = S, c.kind = "none";
    cfgs.push_back(c);
    c.name = "causal_kind", c.kind = "causal";
    cfgs.push_back(c);
  }
  {
    TileConfig c;
    c.name = "general_whole", c.s = S, c.kind = "general", c.qpos = iota(S, S), c.kpos = iota(S, 0), c.qdoc = docs(S, false),
    c.kdoc = docs(S, false);
    cfgs.push_back(c);
    c.name = "partial_causal", c.qpos = periodic(S, 0), c.kpos = periodic(S, 0);
    cfgs.push_back(c);
    c.name = "partial_window", c.window = 2 * T, c.qpos = periodic(S, 2 * T), c.kpos = periodic(S, T / 2);
    cfgs.push_back(c);
    c.name = "partial_document", c.window = 0, c.same_doc = true, c.qpos = iota(S, S), c.kpos = iota(S, 0), c.qdoc = docs(S, true),
    c.kdoc = docs(S, true);
    cfgs.push_back(c);
  }
  for (long s : {S / 8, S / 4, S / 2, S}) {
    TileConfig c;
    c.name = "skip_" + std::to_string(s), c.s = s, c.kind = "general", c.qpos = iota(s, 0), c.kpos = iota(s, s),
    c.qdoc = docs(s, false), c.kdoc = docs(s, false);
    cfgs.push_back(c);
  }

  // The largest configuration's views, on every rank.
  check_bench_fits_ranks(rt.world(),
                         "bench.tile_costs at " + std::to_string(S) + " tokens (" + std::to_string(n) + " heads, " +
                             std::to_string(nkv) + " kv, " + std::to_string(d) + " wide)",
                         float_attention_views_bytes(S, n, nkv, d));
  std::unique_ptr<io::H5Output> h5_out;  // "<out>.tmp" until complete: a failed run leaves the earlier file
  io::H5File* h5 = nullptr;
  const std::string out = output.empty() ? cfg.get_string("bench.output") : output;
  check_bench_output(rt, output, out);
  if (rt.rank() == 0) {
    h5_out = std::make_unique<io::H5Output>(out);
    h5 = &h5_out->file();
    std::printf("attention tile costs (host kernel, float, %ld heads (kv %ld) x %ld, %ld x %ld tiles), CPU seconds, median of %d\n"
                "%18s %6s %8s %8s %8s %10s %10s %12s %12s\n",
                n, nkv, d, T, T, reps, "config", "s", "whole", "partial", "skipped", "fwd ms", "bwd ms", "fwd us/tile",
                "bwd us/tile");
  }
  const float scale = 1.0f / std::sqrt(float(d));
  for (const TileConfig& c : cfgs) {
    const long s = c.s;
    Kokkos::View<float***, Layout, Mem> q("work/q", s, n, d), k("work/k", s, nkv, d), v("work/v", s, nkv, d),
        dout("work/do", s, n, d), o("work/o", s, n, d), dq("work/dq", s, n, d), dk("work/dk", s, nkv, d), dv("work/dv", s, nkv, d);
    Kokkos::View<float**, Layout, Mem> lse("work/lse", s, n), D("work/D", s, n);
    for (auto* x : {&q, &k, &v, &dout}) {
      auto h = Kokkos::create_mirror_view(*x);
      std::mt19937 g(unsigned(s + x->size()));
      std::normal_distribution<float> N(0, 1);
      for (size_t e = 0; e < h.span(); ++e) h.data()[e] = N(g);
      Kokkos::deep_copy(*x, h);
    }
    Kokkos::View<long*, Mem> qp("work/qpos", size_t(s)), kp("work/kpos", size_t(s));
    Kokkos::View<int*, Mem> qd("work/qdoc", size_t(s)), kd("work/kdoc", size_t(s));
    MaskT mask = c.kind == "none" ? MaskT::none() : MaskT::causal(0);
    if (c.kind == "general") {
      Kokkos::deep_copy(qp, Kokkos::View<const long*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(c.qpos.data(), size_t(s)));
      Kokkos::deep_copy(kp, Kokkos::View<const long*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(c.kpos.data(), size_t(s)));
      Kokkos::deep_copy(qd, Kokkos::View<const int*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(c.qdoc.data(), size_t(s)));
      Kokkos::deep_copy(kd, Kokkos::View<const int*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(c.kdoc.data(), size_t(s)));
      mask = MaskT::general(c.causal, c.window, c.same_doc, qd, kd, qp, kp);
    }
    // Tile kinds, from the mask itself on the host (the kernels' own rule).
    long whole = 0, partial = 0, skipped = 0;
    {
      auto hqp = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), qp);
      auto hkp = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), kp);
      auto hqd = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), qd);
      auto hkd = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), kd);
      kernels::AttnMask<Kokkos::HostSpace> hm;
      hm.kind = mask.kind, hm.diag_offset = mask.diag_offset, hm.window = mask.window, hm.is_causal = mask.is_causal,
      hm.same_doc = mask.same_doc, hm.q_pos = hqp, hm.k_pos = hkp, hm.q_doc = hqd, hm.k_doc = hkd;
      for (long i0 = 0; i0 < s; i0 += T)
        for (long j0 = 0; j0 < s; j0 += T) {
          const long i1 = std::min(s, i0 + T), j1 = std::min(s, j0 + T);
          if (!hm.tile_visible(i0, i1, j0, j1)) skipped += n;
          else if (hm.tile_all_visible(i0, i1, j0, j1)) whole += n;
          else partial += n;
        }
    }
    std::vector<double> f, b;
    for (int r = 0; r <= reps; ++r) {  // the first round warms up
      const double c0 = process_cpu_seconds();
      kernels::flash_attention_forward<float, Mem>(q, k, v, mask, scale, o, lse, tiles);
      Kokkos::fence();
      const double c1 = process_cpu_seconds();
      if (r == 0) kernels::attention_backward_rowsum<float, Mem>(dout, o, D), Kokkos::fence();
      const double c2 = process_cpu_seconds();
      kernels::flash_attention_backward<float, Mem>(q, k, v, dout, lse, D, mask, scale, dq, dk, dv, false, tiles);
      Kokkos::fence();
      const double c3 = process_cpu_seconds();
      if (r > 0) f.push_back(c1 - c0), b.push_back(c3 - c2);
    }
    const double tf = median(f), tb = median(b), all = double(whole + partial + skipped);
    if (rt.rank() == 0) {
      const std::string g = "tiles/" + c.name;
      h5->create_group(g);
      h5->set_attr(g, "seq", std::int64_t(s));
      h5->set_attr(g, "mask_kind", c.kind);
      h5->set_attr(g, "causal", std::int64_t(c.causal));
      h5->set_attr(g, "window", std::int64_t(c.window));
      h5->set_attr(g, "same_doc", std::int64_t(c.same_doc));
      h5->set_attr(g, "whole_tiles", std::int64_t(whole));
      h5->set_attr(g, "partial_tiles", std::int64_t(partial));
      h5->set_attr(g, "skipped_tiles", std::int64_t(skipped));
      h5->set_attr(g, "fwd_cpu_s", tf);
      h5->set_attr(g, "bwd_cpu_s", tb);
      h5->write(g + "/fwd_cpu_s_samples", f);
      h5->write(g + "/bwd_cpu_s_samples", b);
      std::printf("%18s %6ld %8ld %8ld %8ld %10.3f %10.3f %12.3f %12.3f\n", c.name.c_str(), s, whole, partial, skipped, tf * 1e3,
                  tb * 1e3, tf / all * 1e6, tb / all * 1e6);
    }
  }
  if (rt.rank() == 0) {
    h5->set_attr("/", "benchmark", std::string("attention tile costs"));
    h5->set_attr("/", "kernel", std::string("host flash attention (kernels/attention_host.hpp)"));
    h5->set_attr("/", "tile_rows", std::int64_t(T));
    h5->set_attr("/", "heads", std::int64_t(n));
    h5->set_attr("/", "kv_heads", std::int64_t(nkv));
    h5->set_attr("/", "head_dim", std::int64_t(d));
    h5->set_attr("/", "threads", std::int64_t(Kokkos::DefaultExecutionSpace::concurrency()));
    h5->set_attr("/", "clock", std::string("CPU seconds of the process (CLOCK_PROCESS_CPUTIME_ID)"));
    set_bench_provenance(*h5, rt, cfg);
    h5_out->publish();  // a file that cannot be completed (disk full) is an error, not a silent loss
    std::printf("wrote %s\n", out.c_str());
  }
  return 0;
}

}  // namespace burst::cli
