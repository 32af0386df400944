// The `burst` executable: parses the command line (identically on every
// rank), starts the runtime, runs one subcommand.
#include "cli/commands.hpp"
#include "cli/environment.hpp"
#include "cli/simulate.hpp"
#include "core/blas_core.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/text_file.hpp"
#include "io/checksum.hpp"
#include "train/trainer.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

namespace {

// What this process was asked to run: its arguments after the program name
// and the contents of the files given to --config (one file under two
// spellings, or two copies of it, are the same), FNV-1a. The ranks compare it
// at start-up (burst::Runtime): ranks started with different arguments
// would otherwise meet in collectives of different sizes (a raw MPI error)
// or wait for each other forever.
std::uint64_t command_digest(int argc, char** argv) {
  std::uint64_t h = burst::io::kFnv1a64Offset;
  const auto mix = [&h](const std::string& s) {
    const std::string framed = std::to_string(s.size()) + ":" + s;
    h = burst::io::fnv1a64(framed.data(), framed.size(), h);
  };
  const auto mix_file = [&mix](const std::string& path) {
    // Only what read_text_file would read (a FIFO or /dev/zero here once hung before the config's own error).
    std::string text;
    try {
      text = burst::read_text_file("config file", path, burst::ErrorKind::Config);
    } catch (const burst::Error&) {
      text = "unreadable " + path;
    }
    mix(text);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--config" && i + 1 < argc) {
      mix(a);
      mix_file(argv[++i]);
    } else if (a.rfind("--config=", 0) == 0) {
      mix("--config");
      mix_file(a.substr(9));
    } else {
      mix(a);
    }
  }
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace burst;
  select_blas_core(argv);  // may re-exec with OPENBLAS_CORETYPE set (core/blas_core.hpp)
  const std::uint64_t digest = command_digest(argc, argv);
  // An error before the runtime: reported once when every rank has it, else
  // by the ranks that have it, without leaving the others waiting (runtime.hpp).
  const auto early_error = [&](int code, const std::string& message, const std::function<void()>& report) {
    if (argc > 1 && std::string(argv[1]) == "simulate") {
      // simulate never starts MPI: no handshake (ranks running it would never join one, and a failing rank
      // would wait in it for ever); each process speaks for itself, with its rank when it is not rank 0.
      // --help and --version: rank 0 alone, as after the handshake (one command line: the same text on each).
      if (launcher_rank() == 0) report();
      else if (code != 0) std::fprintf(stderr, "burst: error (rank %d): %s\n", launcher_rank(), message.c_str());
      return code;
    }
    return startup_error(&argc, &argv, digest, code, message, report);
  };
  const auto early_message = [&](const std::string& message) {
    return early_error(2, message, [&] { std::fprintf(stderr, "burst: error: %s\n", message.c_str()); });
  };
  CLI::App app{"BurstEngine: distributed training of transformers on sequences of 1M+ tokens"};
  app.set_version_flag("--version", BURST_VERSION);
  app.require_subcommand(1);

  auto* info = app.add_subcommand("info", "backend, devices, ranks, node topology, GPU binding, dependency versions");

  std::string train_config;
  std::vector<std::string> train_sets;
  bool train_resume = false;
  auto* trn = app.add_subcommand("train", "train a model (data-parallel over the ranks)");
  trn->add_option("--config", train_config, "TOML run file")->check(CLI::ExistingFile);
  trn->add_option("--set", train_sets, "override a key: --set train.steps=100");
  trn->add_flag("--resume", train_resume, "continue from io.checkpoint when it exists");

  auto* bench = app.add_subcommand("bench", "benchmarks writing HDF5 under experiments/results");
  bench->require_subcommand(1);
  cli::BenchGemmOptions gemm_opt;
  auto* gemm = bench->add_subcommand("gemm", "GEMM GFLOP/s per rank through kernels::gemm");
  gemm->add_option("--config", gemm_opt.config, "TOML run file with a [bench] table")->check(CLI::ExistingFile);
  gemm->add_option("--set", gemm_opt.sets, "override a key: --set bench.sizes=[512,1024]");
  gemm->add_option("--output", gemm_opt.output, "HDF5 output (default: bench.output)");
  cli::BenchGemmOptions attn_opt;
  auto* attn = bench->add_subcommand("attention", "the block flash-attention kernel, forward and backward");
  attn->add_option("--config", attn_opt.config, "TOML run file with a [bench] table")->check(CLI::ExistingFile);
  attn->add_option("--set", attn_opt.sets, "override a key: --set bench.seq=[512,1024]");
  attn->add_option("--output", attn_opt.output, "HDF5 output (default: bench.output)");
  cli::BenchGemmOptions pp_opt;
  auto* pp = bench->add_subcommand("pingpong", "MPI one-way time between ranks 0 and 1 per message size, alpha-beta fit");
  pp->add_option("--config", pp_opt.config, "TOML run file with a [bench] table")->check(CLI::ExistingFile);
  pp->add_option("--set", pp_opt.sets, "override a key: --set bench.bytes=[8,65536]");
  pp->add_option("--output", pp_opt.output, "HDF5 output (default: bench.output)");
  cli::BenchGemmOptions coll_opt;
  auto* coll = bench->add_subcommand("collective", "blocking collectives between compute on shared cores: wall time per collective beyond the compute");
  coll->add_option("--config", coll_opt.config, "TOML run file with a [bench] table")->check(CLI::ExistingFile);
  coll->add_option("--set", coll_opt.sets, "override a key: --set bench.kinds=[\"all_to_all\"]");
  coll->add_option("--output", coll_opt.output, "HDF5 output (default: bench.output)");
  cli::BenchGemmOptions ce_opt;
  auto* cebench = bench->add_subcommand("ce", "the fused chunked LM head + cross-entropy (forward and backward)");
  cebench->add_option("--config", ce_opt.config, "TOML run file with a [bench] table")->check(CLI::ExistingFile);
  cebench->add_option("--set", ce_opt.sets, "override a key: --set bench.chunks=[2048]");
  cebench->add_option("--output", ce_opt.output, "HDF5 output (default: bench.output)");
  cli::BenchGemmOptions kern_opt;
  auto* kbench = bench->add_subcommand("kernels", "the memory-bound layer kernels (RMSNorm, SwiGLU, RoPE, AdamW) vs their byte floors");
  kbench->add_option("--config", kern_opt.config, "TOML run file with a [bench] table")->check(CLI::ExistingFile);
  kbench->add_option("--set", kern_opt.sets, "override a key: --set bench.tokens=4096");
  kbench->add_option("--output", kern_opt.output, "HDF5 output (default: bench.output)");
  cli::BenchGemmOptions layer_opt;
  auto* lbench = bench->add_subcommand("layer", "one LLaMA block (1B / 7B widths), forward + backward, through the model code");
  lbench->add_option("--config", layer_opt.config, "TOML run file with a [bench] table")->check(CLI::ExistingFile);
  lbench->add_option("--set", layer_opt.sets, "override a key: --set bench.preset=1B");
  lbench->add_option("--output", layer_opt.output, "HDF5 output (default: bench.output)");
  cli::BenchGemmOptions step_opt;
  auto* sbench = bench->add_subcommand("step", "one whole training step of a model preset (forward, backward, AdamW): MFU and phases");
  sbench->add_option("--config", step_opt.config, "TOML run file with a [bench] table")->check(CLI::ExistingFile);
  sbench->add_option("--set", step_opt.sets, "override a key: --set bench.tokens=[32768,65536]");
  sbench->add_option("--output", step_opt.output, "HDF5 output (default: bench.output)");

  cli::AttnCheckOptions ac;
  int ranks_per_node = 0;
  auto* chk = app.add_subcommand("attn-check", "distributed attention fwd+bwd against a single-rank double reference");
  chk->add_option("--method", ac.method, "ring | burst | loongtrain | ulysses | usp | allgather")->capture_default_str();
  chk->add_option("--layout", ac.layout, "contiguous | zigzag | striped | document")->capture_default_str();
  chk->add_option("--mask", ac.mask, "full | causal | window | document")->capture_default_str();
  chk->add_option("--window", ac.window, "sliding window (tokens) for --mask window");
  chk->add_option("--doc-lengths", ac.doc_lengths, "document lengths a,b,c summing to --seq");
  chk->add_option("--ring", ac.ring, "flat | double | auto")->capture_default_str();
  chk->add_option("--backward", ac.backward, "burst | kv | auto")->capture_default_str();
  chk->add_option("--partial", ac.partial, "dtype of travelling partial sums: fp32 | bf16")->capture_default_str();
  auto* chk_inner = chk->add_option("--inner", ac.inner, "loongtrain: ranks per inner ring (default: ranks per node)");
  auto* chk_hp = chk->add_option("--hp", ac.hp, "usp: head-parallel size (default: ranks per node)");
  chk->add_option("--placement", ac.placement, "usp: head-first | ring-first")->capture_default_str();
  chk->add_option("--usp-inner", ac.usp_inner, "usp: ring | burst")->capture_default_str();
  chk->add_option("--seq", ac.seq, "tokens in the sequence")->capture_default_str();
  chk->add_option("--heads", ac.heads, "query heads")->capture_default_str();
  chk->add_option("--kv-heads", ac.kv_heads, "key/value heads")->capture_default_str();
  chk->add_option("--head-dim", ac.head_dim, "head dimension")->capture_default_str();
  auto* chk_rpn = chk->add_option("--ranks-per-node", ranks_per_node, "emulate nodes of this many ranks (BURST_GPUS_PER_NODE)");
  chk->add_option("--dtype", ac.dtype, "float | double | bf16")->capture_default_str();
  chk->add_option("--seed", ac.seed, "seed of the random inputs")->capture_default_str();
  chk->add_option("--tolerance", ac.tolerance, "relative error allowed (default 1e-10 double, 1e-4 float)");
  chk->add_option("--input", ac.input, "HDF5 with q k v do [S, heads, d] in natural order")->check(CLI::ExistingFile);
  chk->add_option("--output", ac.output, "HDF5 to write o lse dq dk dv (natural order)");

  cli::SimulateOptions so;
  auto* sim = app.add_subcommand("simulate", "performance and memory model of a training step at cluster scale (no GPUs needed)");
  sim->add_option("--cluster", so.cluster, "a800 | h200 | path to a cluster .toml")->capture_default_str();
  sim->add_option("--model", so.model, "7B | 14B | other preset | path to a config.json")->capture_default_str();
  sim->add_option("--seq", so.seq, "tokens per sequence: 32768, 128K, 1M (K = 1024)")->capture_default_str();
  sim->add_option("--gpus", so.gpus, "GPUs in the sequence-parallel group")->capture_default_str();
  sim->add_option("--method", so.method, "burst | ring | ulysses | usp | loongtrain | allgather")->capture_default_str();
  auto* sim_hp = sim->add_option("--hp", so.hp, "usp: head-parallel size (default: GPUs per node)");
  auto* sim_inner = sim->add_option("--inner", so.inner, "loongtrain: ranks per inner ring (default: GPUs per node)");
  sim->add_option("--placement", so.placement, "usp: head-first | ring-first")->capture_default_str();
  sim->add_option("--usp-inner", so.usp_inner, "usp: ring | burst")->capture_default_str();
  sim->add_option("--ring", so.ring, "flat | double | auto")->capture_default_str();
  sim->add_option("--backward", so.backward, "burst | kv | auto")->capture_default_str();
  sim->add_option("--partial", so.partial, "travelling partial sums: fp32 | bf16")->capture_default_str();
  sim->add_option("--mask", so.mask, "causal (zigzag) | full | window (contiguous layout) | document (with --doc-lengths)")
      ->capture_default_str();
  sim->add_option("--layout", so.layout,
                  "--attention-only, ring methods: contiguous | zigzag | striped | document (rounds costed from the layout's "
                  "visible pairs)");
  sim->add_option("--doc-lengths", so.doc_lengths, "document lengths a,b,c summing to --seq (--mask document, --layout document)");
  sim->add_option("--window", so.window, "sliding window in tokens, with --mask window");
  sim->add_option("--policy", so.policy, "activation policy: keep | full | whole | half")->capture_default_str();
  sim->add_option("--fused-loss", so.fused_loss, "on | off")->capture_default_str();
  sim->add_option("--zero", so.zero, "ZeRO stage 0-3 over all GPUs")->capture_default_str();
  sim->add_option("--offload", so.offload, "optimizer on the host (CPU Adam): on | off")->capture_default_str();
  auto* sim_gpn = sim->add_option("--gpus-per-node", so.gpus_per_node, "override the cluster's ranks per node (emulated nodes, BURST_GPUS_PER_NODE)");
  sim->add_option("--host-cores", so.host_cores, "CPU clusters: cores the ranks share (override host.cores; may be fractional)");
  sim->add_option("--host-cpu", so.host_cpu,
                  "CPU clusters: the CPU a real run's ranks used, CPU seconds per wall second (as --host-cores, idle waits left out)");
  sim->add_flag("--attention-only", so.attention_only, "one layer's distributed attention, fwd + bwd (burst bench attention's case)");
  sim->add_option("--table", so.table, "paper (every table of the paper) | calibration (the calibration points)");
  sim->add_option("--output", so.output, "HDF5 output");
  sim->add_option("--data-dir", so.data_dir, "directory holding clusters/ and perf_calibration.toml (default: the source tree's experiments/)");
  sim->add_option("--calibration", so.calibration, "calibration TOML (default: <data-dir>/perf_calibration.toml)");
  cli::ImportHfOptions imp;
  auto* impc = app.add_subcommand("import-hf", "Hugging Face config.json + .safetensors (single or sharded) -> HDF5 weights");
  impc->add_option("--model-dir", imp.model_dir, "directory with config.json and model.safetensors[.index.json]")->required();
  impc->add_option("--output", imp.output, "HDF5 weights file to write")->required();
  impc->add_option("--dtype", imp.dtype, "float32 | float64 | auto (float64 when the checkpoint holds F64)")->capture_default_str();
  cli::ExportHfOptions exp;
  auto* expc = app.add_subcommand("export-hf", "HDF5 weights or checkpoint -> .safetensors (+ index when sharded) + config.json");
  expc->add_option("--weights", exp.weights, "HDF5 weights or checkpoint")->required();
  expc->add_option("--output", exp.output, "output directory (created)")->required();
  expc->add_option("--dtype", exp.dtype, "bf16 | f16 | f32 | f64")->capture_default_str();
  expc->add_option("--max-shard-mb", exp.max_shard_mb, "largest shard in MiB (0: one file)")->capture_default_str();
  cli::ForwardOptions fwd;
  auto* fwdc = app.add_subcommand("forward", "logits (and hidden states) of the model for the token rows of an HDF5 file");
  fwdc->add_option("--model", fwd.model, "preset name or Hugging Face config.json")->required();
  fwdc->add_option("--weights", fwd.weights, "HDF5 weights or checkpoint")->required();
  fwdc->add_option("--tokens", fwd.tokens, "HDF5 file with dataset 'tokens' [s] or [b, s]")->required();
  fwdc->add_option("--output", fwd.output, "HDF5 output: logits [, hidden_states]")->required();
  fwdc->add_option("--dtype", fwd.dtype, "float | double")->capture_default_str();
  fwdc->add_flag("--hidden-states", fwd.hidden_states, "also write the per-layer hidden states");

  // 0 stands for "not given" inside (the default of these options); given on
  // the command line it is as wrong as a negative value.
  const auto refuse_given_zero = [](CLI::Option* opt, long value, const char* note) {
    BURST_CHECK_CONFIG(opt->count() == 0 || value != 0, opt->get_name(), " 0 must be >= 1", note);
  };
  // An unknown subcommand word of `parent` named with the known ones (CLI11
  // says only "A subcommand is required" for `burst bench WORD`), or "".
  const auto unknown_word = [](CLI::App* parent, const char* word, const char* kind, const char* help) {
    std::string names;
    bool known = false;
    for (auto* sc : parent->get_subcommands([](CLI::App*) { return true; })) {
      known = known || sc->get_name() == word;
      names += (names.empty() ? "" : ", ") + sc->get_name();
    }
    return known ? std::string() : str_cat("unknown ", kind, " '", word, "' (known: ", names, "; see ", help, ")");
  };
  if (argc > 1 && argv[1][0] != '-') {
    std::string unknown = unknown_word(&app, argv[1], "subcommand", "--help");
    if (unknown.empty() && std::string(argv[1]) == "bench" && argc > 2 && argv[2][0] != '-')
      unknown = unknown_word(bench, argv[2], "bench subcommand", "burst bench --help");
    if (!unknown.empty()) return early_message(unknown);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 says it its way (rank 0 for all when every rank has it).
    return early_error(e.get_exit_code() == 0 ? 0 : 2, e.what(), [&] { app.exit(e); });
  }

  // An empty --output given is refused: the commands read "" as "not
  // given" and would write to their default path instead.
  {
    std::vector<CLI::App*> todo = {&app};
    while (!todo.empty()) {
      CLI::App* a = todo.back();
      todo.pop_back();
      for (CLI::App* sc : a->get_subcommands()) todo.push_back(sc);  // the ones given
      const CLI::Option* o = a->get_option_no_throw("--output");
      if (o != nullptr && o->count() > 0 && o->as<std::string>().empty())
        return early_message("--output is empty: give the file to write (or leave --output out for the default)");
    }
  }

  // The model needs no runtime (no MPI, no Kokkos).
  if (*sim) {
    try {
      for (const CLI::Option* op : sim->get_options())
        if (op->count() > 0) so.given.insert(op->get_name());
      for (const char* name : {"--host-cores", "--host-cpu"}) {  // doubles: 0 is "not given" inside, as for the integers
        const CLI::Option* op = sim->get_option(name);
        BURST_CHECK_CONFIG(op->count() == 0 || op->as<double>() != 0, name, " 0 must be > 0");
      }
      refuse_given_zero(sim_gpn, so.gpus_per_node, "");
      refuse_given_zero(sim_hp, so.hp, " (default: GPUs per node)");
      refuse_given_zero(sim_inner, so.inner, " (default: GPUs per node)");
      return cli::cmd_simulate(so);
    } catch (const std::exception& e) {
      exit_on_error(e);
    }
  }

  // The runtime lives outside the try block so that an error is handled
  // while MPI is still up (a failing rank must be able to abort the job).
  if (*chk && (ranks_per_node != 0 || chk_rpn->count() > 0)) {
    if (ranks_per_node < 1) return early_message(str_cat("--ranks-per-node ", ranks_per_node, " must be >= 1"));
    setenv("BURST_GPUS_PER_NODE", std::to_string(ranks_per_node).c_str(), 1);  // read by the runtime's topology
  }
  std::unique_ptr<Runtime> rt;
  int rc = 0;
  try {
    rt = std::make_unique<Runtime>(&argc, &argv, digest);  // the ranks compare their digests first
    cli::check_run_environment();  // BURST_FA_*, BURST_ROPE_CUDA: closed lists (cli/environment.hpp)
    if (*info) rc = cli::cmd_info(*rt);
    else if (*gemm) rc = cli::cmd_bench_gemm(*rt, gemm_opt);
    else if (*attn) rc = cli::cmd_bench_attention(*rt, attn_opt);
    else if (*pp) rc = cli::cmd_bench_pingpong(*rt, pp_opt);
    else if (*coll) rc = cli::cmd_bench_collective(*rt, coll_opt);
    else if (*cebench) rc = cli::cmd_bench_ce(*rt, ce_opt);
    else if (*kbench) rc = cli::cmd_bench_kernels(*rt, kern_opt);
    else if (*lbench) rc = cli::cmd_bench_layer(*rt, layer_opt);
    else if (*sbench) rc = cli::cmd_bench_step(*rt, step_opt);
    else if (*chk) {
      refuse_given_zero(chk_hp, ac.hp, " (default: ranks per node)");
      refuse_given_zero(chk_inner, ac.inner, " (default: ranks per node)");
      rc = cli::cmd_attn_check(*rt, ac);
    }
    else if (*impc) rc = cli::cmd_import_hf(*rt, imp);
    else if (*expc) rc = cli::cmd_export_hf(*rt, exp);
    else if (*fwdc) rc = cli::cmd_forward(*rt, fwd);
    else if (*trn) {
      train(*rt, train_schema().load(train_config, train_sets), train_resume);
    }
  } catch (const std::exception& e) {
    exit_on_error(e);
  }
  rt.reset();
  return rc;
}
