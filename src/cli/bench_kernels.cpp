// `burst bench kernels`: the memory-bound kernels of a LLaMA layer at one
// shape (32K tokens, 7B widths by default) through the kernels:: functions
// (on CUDA builds: RMSNorm's CUDA kernels, the portable Kokkos kernels for
// the rest), each against its byte floor: median time, the fewest bytes the
// operation must move (every input read once, every output written once),
// and the achieved GB/s = floor bytes / time. Rank 0's numbers are written.
#include "cli/bench_common.hpp"
#include "cli/bench_memory.hpp"
#include "cli/commands.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/timer.hpp"
#include "io/h5.hpp"
#include "io/h5_output.hpp"
#include "kernels/activations.hpp"
#include "kernels/attention.hpp"
#include "kernels/optim.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

namespace burst::cli {

static ConfigSchema bench_kernels_schema() {
  ConfigSchema s;
  s.integer("bench.tokens", 32768, 1, 1L << 24, "tokens")
      .integer("bench.hidden", 4096, 1, 1 << 20, "hidden size (RMSNorm)")
      .integer("bench.ffn", 11008, 1, 1 << 20, "MLP width (SwiGLU)")
      .integer("bench.heads", 32, 1, 4096, "heads (RoPE on q)")
      .integer("bench.head_dim", 128, 2, 1024, "head dimension (RoPE)")
      .integer("bench.adam_params", 1L << 28, 1, 1L << 34, "fp32 parameters updated by AdamW")
      .integer("bench.attn_block", 2048, 0, 1L << 20,
               "the ring forward's step on a block of this many queries and keys (full mask, bench.heads x "
               "bench.head_dim): merged into the running O by the forward itself, and as a partial + lse_merge "
               "(0: skip)")
      .string("bench.dtype", "bf16", {"bf16", "float"}, "activation type (AdamW is always fp32)")
      .integer("bench.repeats", 10, 1, 10000, "timed repetitions (median)")
      .string("bench.output", "experiments/results/kernels.h5", {}, "HDF5 file to write");
  return s;
}

namespace {
template <class V> void fill_hash(const V& v, unsigned seed, double amp) {
  using T = typename V::non_const_value_type;
  const long n = long(v.size());
  auto flat = Kokkos::View<T*, Layout, typename V::memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(v.data(), n);
  Kokkos::parallel_for(
      "burst::bench_kernels_fill", Kokkos::RangePolicy<ExecSpace>(0, n), KOKKOS_LAMBDA(const long i) {
        unsigned long x = (unsigned long)(i) * 0x9E3779B97F4A7C15ul + seed * 0xBF58476D1CE4E5B9ul;
        x ^= x >> 31;
        x *= 0x94D049BB133111EBul;
        x ^= x >> 29;
        flat(i) = T((double(x >> 11) * (2.0 / 9007199254740992.0) - 1.0) * amp);
      });
}
}  // namespace

template <class T> static void run(Runtime& rt, const Config& cfg, const std::string& output) {
  using Mem = DeviceMem;
  using Acc = accum_t<T>;
  const long N = cfg.get_int("bench.tokens"), H = cfg.get_int("bench.hidden"), F = cfg.get_int("bench.ffn");
  const long nh = cfg.get_int("bench.heads"), d = cfg.get_int("bench.head_dim"), P = cfg.get_int("bench.adam_params");
  const int repeats = int(cfg.get_int("bench.repeats"));
  {  // the largest group of views alive at once, before any group runs
    const double e = double(sizeof(T)), a = double(sizeof(Acc)), n = double(N);
    const double groups[] = {4.0 * n * double(H) * e + double(H) * (e + a) + n * a,   // RMSNorm
                             6.0 * n * double(F) * e,                                 // SwiGLU
                             n * double(nh) * double(d) * e + 8.0 * n,                // RoPE
                             4.0 * 4.0 * double(P),                                   // AdamW (fp32)
                             2.0 * n * double(nh) * (double(d) + 1.0) * a,            // lse merge (o, ob, lse, lseb)
                             double(cfg.get_int("bench.attn_block")) * double(nh) *   // ring forward step
                                 (3.0 * double(d) * e + 2.0 * (double(d) + 1.0) * a)};
    check_bench_fits("bench kernels at " + std::to_string(N) + " tokens (hidden " + std::to_string(H) + ", ffn " +
                         std::to_string(F) + ", " + std::to_string(nh) + " x " + std::to_string(d) + " heads, " +
                         std::to_string(P) + " AdamW parameters)",
                     *std::max_element(std::begin(groups), std::end(groups)));
  }
  std::vector<std::string> names;
  std::vector<double> secs, bytes;
  const auto time_it = [&](const std::string& name, double floor_bytes, const std::function<void()>& fn) {
    fn();
    Kokkos::fence();
    std::vector<double> ts;
    for (int r = 0; r < repeats; ++r) {
      Timer t;
      fn();
      Kokkos::fence();
      ts.push_back(t.seconds());
    }
    std::sort(ts.begin(), ts.end());
    names.push_back(name), secs.push_back(ts[ts.size() / 2]), bytes.push_back(floor_bytes);
  };
  const double e = double(sizeof(T));
  {
    View2<T> x("work/k.x", N, H), y("work/k.y", N, H), dy("work/k.dy", N, H), dx("work/k.dx", N, H);
    View1<T> w("work/k.w", H);
    View1<Acc> rstd("work/k.rstd", N), dw("work/k.dw", H);
    fill_hash(x, 1, 2.0), fill_hash(dy, 2, 1.0), fill_hash(w, 3, 1.0);
    time_it("rmsnorm_forward", 2.0 * N * H * e + 4.0 * N, [&] { kernels::rmsnorm_forward<T, Mem>(x, w, 1e-5, y, rstd); });
    time_it("rmsnorm_backward", 3.0 * N * H * e + 4.0 * N,
            [&] { kernels::rmsnorm_backward<T, Mem>(dy, x, w, rstd, dx, dw); });
    // The block's form: the residual (the skip connection's gradient) added in the same pass.
    time_it("rmsnorm_backward_residual", 4.0 * N * H * e + 4.0 * N,
            [&] { kernels::rmsnorm_backward<T, Mem>(dy, x, w, rstd, dx, dw, y); });
  }
  {
    View2<T> g("work/k.gate", N, F), u("work/k.up", N, F), h("work/k.h", N, F), dh("work/k.dh", N, F);
    View2<T> dg("work/k.dgate", N, F), du("work/k.dup", N, F);
    fill_hash(g, 4, 3.0), fill_hash(u, 5, 1.0), fill_hash(dh, 6, 1.0);
    time_it("swiglu_forward", 3.0 * N * F * e, [&] { kernels::swiglu_forward<T, Mem>(g, u, h); });
    time_it("swiglu_backward", 5.0 * N * F * e, [&] { kernels::swiglu_backward<T, Mem>(dh, g, u, dg, du); });
  }
  {
    View3<T> q("work/k.q", N, nh, d);
    View1<long> pos("work/k.pos", N);
    View1<double> inv("work/k.inv_freq", d / 2);
    fill_hash(q, 7, 1.0);
    Kokkos::parallel_for("burst::bench_kernels_pos", Kokkos::RangePolicy<ExecSpace>(0, N), KOKKOS_LAMBDA(const long i) { pos(i) = i; });
    kernels::RopeConfig rc;
    rc.theta = 500000.0, rc.head_dim = d, rc.max_position_embeddings = N;
    const kernels::RopeTable tab = kernels::rope_table(rc, N);
    auto hinv = Kokkos::create_mirror_view(inv);
    for (long i = 0; i < d / 2; ++i) hinv(i) = tab.inv_freq[i];
    Kokkos::deep_copy(inv, hinv);
    time_it("rope_apply", 2.0 * N * nh * d * e + 8.0 * N, [&] { kernels::rope_apply<T, Mem>(q, pos, inv, 1.0, false); });
  }
  {
    // The ring forward's merge of a visiting block's partial (O_b, lse_b)
    // into the running (O, lse), accumulation type: o, ob read, o written,
    // lse, lseb read, lse written. The engine's entry (on CUDA fp32 views the
    // warp-per-row kernel) and the portable kernel (a thread per row).
    View3<Acc> o("work/k.o", N, nh, d), ob("work/k.ob", N, nh, d);
    View2<Acc> lse("work/k.lse", N, nh), lseb("work/k.lseb", N, nh);
    fill_hash(o, 10, 1.0), fill_hash(ob, 11, 1.0), fill_hash(lse, 12, 4.0), fill_hash(lseb, 13, 4.0);
    const double mb = 3.0 * double(N) * double(nh) * (double(d) + 1.0) * double(sizeof(Acc));
    time_it("lse_merge", mb, [&] { kernels::lse_merge<Acc, Mem>(o, lse, ob, lseb); });
    time_it("lse_merge_portable", mb, [&] { kernels::impl::lse_merge_portable<Acc, Mem>(o, lse, ob, lseb); });
  }
  if (const long B = cfg.get_int("bench.attn_block"); B > 0) {
    // The ring forward's step for one visiting block (ring_family.cpp):
    // flash_attention_forward_merge (on CUDA bf16, merged in the kernel's
    // epilogue) against the same forward into a partial (O_b, lse_b) and
    // lse_merge. Floor bytes: Q, K, V read, the running O and lse read and
    // written; the difference in time is the partial's round trip.
    View3<T> q("work/k.q", B, nh, d), k("work/k.k", B, nh, d), v("work/k.v", B, nh, d);
    View3<Acc> o("work/k.o", B, nh, d), ob("work/k.ob", B, nh, d);
    View2<Acc> lse("work/k.lse", B, nh), lseb("work/k.lseb", B, nh);
    fill_hash(q, 14, 1.0), fill_hash(k, 15, 1.0), fill_hash(v, 16, 1.0);
    const Acc scale = Acc(1.0 / std::sqrt(double(d)));
    const auto none = kernels::AttnMask<Mem>::none();
    kernels::flash_attention_forward<T, Mem>(q, k, v, none, scale, o, lse);  // a running result to merge into
    const double mb = 3.0 * double(B) * double(nh) * double(d) * e + 2.0 * double(B) * double(nh) * (double(d) + 1.0) * double(sizeof(Acc));
    time_it("attn_fwd_plain", mb, [&] {  // the forward alone, into the partial (the kernel both paths run)
      kernels::flash_attention_forward<T, Mem>(q, k, v, none, scale, ob, lseb, kernels::AttnTiles::uncounted());
    });
    time_it("ring_fwd_step_merged", mb, [&] {
      kernels::flash_attention_forward_merge<T, Mem>(q, k, v, none, scale, o, lse, ob, lseb, kernels::AttnTiles::uncounted());
    });
    time_it("ring_fwd_step_partial", mb, [&] {
      kernels::impl::forward_then_merge<T, Mem>(q, k, v, none, scale, o, lse, ob, lseb, kernels::AttnTiles::uncounted());
    });
  }
  {
    View1<float> p("work/k.p", P), g("work/k.g", P), m("work/k.m", P), v("work/k.v", P);
    fill_hash(p, 8, 1.0), fill_hash(g, 9, 1e-3);
    kernels::AdamWParams hp;
    long t = 0;
    time_it("adamw_step_fp32", 28.0 * P, [&] { kernels::adamw_step<float, Mem>(p, g, m, v, hp, ++t); });
    double ss = 0;
    time_it("sum_squares_fp32", 4.0 * P, [&] { ss += kernels::sum_squares<float, Mem>(g); });  // the gradient norm's pass
  }
  if (rt.rank() == 0) {
    std::printf("memory-bound kernels, %s, %ld tokens (hidden %ld, ffn %ld, %ld x %ld heads), AdamW over %ld fp32 params, on %s\n",
                scalar_name<T>(), N, H, F, nh, d, P, Kokkos::DefaultExecutionSpace::name());
    std::printf("%-18s %11s %12s %10s\n", "kernel", "median ms", "floor MB", "GB/s");
    std::vector<double> gbps;
    for (size_t i = 0; i < names.size(); ++i) {
      gbps.push_back(bytes[i] / secs[i] / 1e9);
      std::printf("%-18s %11.4f %12.1f %10.1f\n", names[i].c_str(), secs[i] * 1e3, bytes[i] / 1e6, gbps.back());
    }
    io::H5Output f_out(output);  // "<output>.tmp" until complete: a failed run leaves the earlier file
    io::H5File& f = f_out.file();
    std::string all;
    for (const auto& n : names) all += (all.empty() ? "" : ";") + n;
    f.set_attr("/", "kernel_names", all);
    f.write("kernels/seconds", secs);
    f.write("kernels/floor_bytes", bytes);
    f.write("kernels/gbps", gbps);
    f.set_attr("/", "benchmark", std::string("kernels"));
    f.set_attr("/", "dtype", std::string(scalar_name<T>()));
    set_bench_provenance(f, rt, cfg);
    f_out.publish();  // a file that cannot be completed (disk full) is an error, not a silent loss
    std::printf("wrote %s\n", output.c_str());
  }
}

int cmd_bench_kernels(Runtime& rt, const BenchGemmOptions& opt) {
  ConfigSchema schema = bench_kernels_schema();
  const Config cfg = schema.load(opt.config, opt.sets);
  const std::string output = opt.output.empty() ? cfg.get_string("bench.output") : opt.output;
  // RoPE rotates pairs: found before RMSNorm and SwiGLU are timed, not after.
  BURST_CHECK_CONFIG(cfg.get_int("bench.head_dim") % 2 == 0, "bench.head_dim = ", cfg.get_int("bench.head_dim"),
                     " must be even (RoPE rotates pairs of elements)");
  check_bench_output(rt, opt.output, output);
  if (cfg.get_string("bench.dtype") == "bf16") run<bf16>(rt, cfg, output);
  else run<float>(rt, cfg, output);
  return 0;
}

}  // namespace burst::cli
