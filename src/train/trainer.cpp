#include "train/trainer.hpp"

#include "comm/collectives.hpp"
#include "comm/watchdog.hpp"
#include "core/durable.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/signals.hpp"
#include "core/timer.hpp"
#include "data/source.hpp"
#include "io/h5.hpp"
#include "io/run_log.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/optim.hpp"
#include "model/llama.hpp"
#include "train/checkpoint_files.hpp"
#include "train/flops.hpp"
#include "train/sequence_parallel.hpp"
#include "train/weights.hpp"
#include "train/memory_model.hpp"
#include "train/zero.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <cmath>
#include <csignal>
#include <ctime>
#include <exception>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <sstream>
#include <thread>

namespace burst {

ConfigSchema train_schema() {
  ConfigSchema s;
  s.string("model.preset", "tiny", {}, "model preset (tiny, 125M, 1B, 7B, 14B), unless model.config is given")
      .string("model.config", "", {}, "Hugging Face config.json (overrides the preset)")
      .int_list("model.nope_layers", {}, 0, 1 << 20,
                "layers whose attention takes no rotary embedding (NoPE, as Llama 4's interleaved layers; added to the "
                "config's own)")
      .int_list("model.window_layers", {}, 0, 1 << 20,
                "layers whose attention is a causal sliding window of model.sliding_window tokens (added to the config's own)")
      .integer("model.attn_log_scale", 0, 0, 1 << 30,
               "log-length attention scaling: queries times max(1, ln n / ln this), n the keys a token sees (0: the "
               "config's)")
      .integer("model.sliding_window", 0, 0, 1 << 30,
               "tokens a sliding-window layer sees, its own included (0: the config's)")
      .real("model.init_std", 0.02, 1e-6, 10, "std of the normal initialisation of matrices")
      .string("model.init_from", "", {},
              "start from these weights (burst import-hf output, a weights file or a checkpoint's params) instead of a "
              "random initialisation; --resume still takes the checkpoint")
      .string("train.dtype", "float", {"float", "double", "bf16"},
              "storage type of the model: float, double, or bf16 (bf16 weights and activations, fp32 master weights, "
              "gradients and AdamW moments; on the GPU the tensor-core kernels)")
      .integer("train.steps", 300, 1, 100000000, "optimizer steps")
      .integer("train.batch", 16, 1, 1 << 20, "sequences per optimizer step over all replicas (must divide by the rank count)")
      .integer("train.seq_len", 128, 8, 1 << 24, "tokens per sequence")
      .real("train.lr", 3e-3, 0, 10, "peak learning rate")
      .real("train.min_lr", 3e-4, 0, 10, "final learning rate of the cosine schedule")
      .integer("train.warmup", 30, 0, 100000000, "linear warmup steps")
      .real("train.weight_decay", 0.1, 0, 10, "AdamW decoupled weight decay (not on norms)")
      .real("train.peak_tflops", 0, 0, 1e9,
            "dense peak per rank for the logged MFU (0: 989 on a GPU build, the H100/H200 bf16 convention of "
            "ALGORITHMS.md section 9; 0.224 on the host, OpenBLAS sgemm on 2 cores, PLATFORM.md)")
      .real("train.beta1", 0.9, 0, 0.999999, "AdamW beta1")
      .real("train.beta2", 0.95, 0, 0.999999, "AdamW beta2")
      .real("train.eps", 1e-8, 1e-30, 1, "AdamW epsilon")
      .real("train.grad_clip", 1.0, 0, 1e9, "global gradient-norm clip (0 = off)")
      .integer("train.seed", 1234, 0, (1ll << 62), "seed of initialisation and data")
      .integer("train.stop_after", 0, 0, 100000000,
               "end this run after that many steps (checkpointing), leaving the schedule of train.steps intact; 0 = run to the end")
      .integer("train.log_every", 10, 1, 1 << 30, "steps between progress lines")
      .integer("train.eval_every", 100, 0, 1 << 30, "steps between held-out evaluations (0 = only at the end)")
      .integer("train.eval_sequences", 32, 1, 1 << 20, "held-out sequences per evaluation")
      .integer("train.attention_window", 0, 0, 1 << 30, "restrict attention to a causal window (0 = full causal)")
      .integer("train.short_steps", 0, 0, 100000000,
               "curriculum: the first this many steps train on train.short_seq_len tokens (0 = off)")
      .integer("train.short_seq_len", 128, 8, 1 << 24, "curriculum: tokens per sequence of the first train.short_steps steps")
      .int_list("train.eval_seq_lens", {}, 8, 1 << 24,
                "sequence lengths of the held-out evaluation (empty: train.seq_len); logged as eval_accuracy_<len>")
      .string("train.activation", "keep", {"keep", "full", "whole", "half"},
              "what a layer keeps for backward: keep (everything), full (its input; recompute with attention), whole (full + "
              "attention O and lse), half (full + O, lse of the second half of the tokens; striped layout)")
      .integer("train.loss_chunk", 0, 0, 1 << 30,
               "LM head fused with the loss, tokens per chunk (never an [s, V] logits buffer); 0 = the plain head")
      .integer("train.zero", 0, 0, 3,
               "ZeRO stage over all ranks: 1 shards the AdamW moments, 2 also the gradients, 3 also the parameters "
               "(gathered a layer at a time)")
      .boolean("train.offload", false, "AdamW moments and update in host memory (for GPU builds)")
      .integer("parallel.cp", 1, 1, 1 << 20,
               "sequence-parallel ranks per replica (must divide the rank count); the ranks / cp replicas are data parallel")
      .string("parallel.method", "burst", {"ring", "burst", "loongtrain", "ulysses", "usp", "allgather"},
              "distributed attention method over the cp ranks")
      .string("parallel.layout", "auto", {"auto", "contiguous", "zigzag", "striped", "document"},
              "sequence layout over the cp ranks (auto: zigzag for causal, contiguous for a window, striped for "
              "train.activation = half)")
      .string("parallel.ring", "auto", {"flat", "double", "auto"}, "ring shape (auto: burst and USP double when the cp group spans whole nodes, flat when a flat ring stops early (a window on the contiguous layout); the ring method flat)")
      .string("parallel.backward", "auto", {"burst", "kv", "auto"},
              "what travels in backward (auto: Q, dO, lse, D for MHA, K, V for GQA)")
      .string("parallel.partial", "fp32", {"fp32", "bf16"}, "dtype of the partial sums that travel")
      .integer("parallel.inner", 0, 0, 1 << 20, "loongtrain: ranks per inner ring (0 = the cp group's ranks per node)")
      .integer("parallel.hp", 0, 0, 1 << 20, "usp: head-parallel size (0 = the cp group's ranks per node)")
      .string("parallel.placement", "head-first", {"head-first", "ring-first"}, "usp: where the head-parallel group sits")
      .string("parallel.usp_inner", "burst", {"ring", "burst"}, "usp: the ring over the cp blocks")
      .string("train.on_nonfinite", "abort", {"abort", "skip"},
              "a step whose loss or gradient norm is not finite: abort (checkpoint, name the tensor, exit 3) or skip "
              "(no update, counted in the run log's 'skipped' column)")
      .string("io.run_log", "", {}, "HDF5 run log ('' = none)")
      .string("io.checkpoint", "", {}, "HDF5 checkpoint path ('' = none)")
      .boolean("io.overwrite", false,
               "a new run (no --resume) may replace an earlier run's io.run_log, io.checkpoint and step files "
               "(false: it refuses to start, naming them)")
      .integer("io.checkpoint_every", 0, 0, 1 << 30, "steps between checkpoints (0 = only at the end)")
      .string("io.verify_checkpoint", "structure", {"structure", "checksum", "off"},
              "how a written checkpoint is checked before it is renamed into place: structure (reopened; every "
              "dataset's shape, type, stored bytes and checksum attribute: metadata only, the same cost at any model "
              "size), checksum (also every dataset read back against its checksum: minutes for a large model, while "
              "the other ranks wait within io.checkpoint_timeout_s) or off (HDF5's close alone)")
      .integer("io.keep_last", 2, 1, 1000,
               "checkpoints kept as <checkpoint stem>.stepNNNNNNNN.h5; --resume falls back to an older one when the newest is damaged")
      .real("io.checkpoint_timeout_s", 3600, 0, 1e7,
            "longest wait for a checkpoint: rank 0 writing, checking and syncing it, the other ranks waiting for it "
            "(their collective's bound there, instead of comm.timeout_s); twice this is the watchdog's bound of the "
            "write (0 = wait forever, else at least 1)")
      .real("comm.timeout_s", 300, 0, 1e7,
            "longest wait of a collective for the other ranks before the run stops naming it; a step with no progress for "
            "twice this is aborted by the watchdog (0 = wait forever, else at least 1)")
      // Test hooks: faults on purpose, to check that the engine survives them.
      .integer("debug.inject_nan_step", -1, -1, 100000000, "for tests: put a NaN into one gradient at this step (-1 = never)")
      .string("debug.inject_nan_tensor", "model.layers.0.self_attn.q_proj.weight", {},
              "for tests: the parameter whose gradient gets the NaN (on rank 0)")
      .string("debug.fault", "none", {"none", "kill", "stop", "hang"},
              "for tests: at debug.fault_step, rank debug.fault_rank SIGKILLs or SIGSTOPs itself or hangs, mid-step")
      .integer("debug.fault_rank", 0, 0, 1 << 20, "for tests: the rank of debug.fault")
      .integer("debug.fault_step", 0, 0, 100000000, "for tests: the step of debug.fault")
      .real("debug.checkpoint_delay_s", 0, 0, 3600,
            "for tests: rank 0 takes this much longer to write each checkpoint (a slow file system)");
  data::add_data_schema(s);
  s.rule([](const Config& c) -> std::string {
    if (c.get_real("train.min_lr") > c.get_real("train.lr"))
      return "train.min_lr = " + std::to_string(c.get_real("train.min_lr")) + " must not exceed train.lr = " +
             std::to_string(c.get_real("train.lr"));
    return "";
  });
  s.rule([](const Config& c) -> std::string {
    // A curriculum's short sequences are the shorter ones (unused when train.short_steps = 0).
    if (c.get_int("train.short_steps") > 0 && c.get_int("train.short_seq_len") > c.get_int("train.seq_len"))
      return "train.short_seq_len = " + std::to_string(c.get_int("train.short_seq_len")) + " exceeds train.seq_len = " +
             std::to_string(c.get_int("train.seq_len")) + " (the curriculum's first train.short_steps = " +
             std::to_string(c.get_int("train.short_steps")) + " steps train on the shorter sequences)";
    return "";
  });
  s.rule([](const Config& c) -> std::string {
    // Below a second every collective times out (1e-6 aborted every run).
    for (const char* key : {"comm.timeout_s", "io.checkpoint_timeout_s"}) {
      const double t = c.get_real(key);
      if (t != 0 && t < 1) {
        std::ostringstream os;
        os << key << " = " << t << " is too short: 0 (wait forever) or at least 1 second";
        return os.str();
      }
    }
    return "";
  });
  s.rule([](const Config& c) -> std::string {
    if (c.get_int("train.attention_window") > c.get_int("train.seq_len"))
      return "train.attention_window = " + std::to_string(c.get_int("train.attention_window")) + " exceeds train.seq_len = " +
             std::to_string(c.get_int("train.seq_len")) + " (0 means full causal attention)";
    return "";
  });
  return s;
}

namespace {

// 2: every dataset carries an fnv1a64 checksum attribute (train/weights.hpp).
constexpr std::int64_t kCheckpointFormat = kCheckpointFormatVersion;

// Output files go into writable directories that exist, and are not
// directories themselves: found before training (bad input, status 2) rather
// than at the first checkpoint (an abort). Rank 0 of `comm` writes them, so
// it checks them for every rank. An empty path writes nothing.
void check_output_dir(const Config& cfg, const std::string& key, MPI_Comm comm) {
  const std::string path = cfg.get_string(key);
  if (!path.empty()) check_output_path_on_root(comm, key, path);
}

template <class T> struct TrainerImpl {
  using Mem = DeviceMem;
  using A = accum_t<T>;  // gradients, moments and the master weights (what checkpoints hold)
  Runtime& rt;
  const Config& cfg;
  MPI_Comm comm;
  int rank = 0, size = 1;
  std::shared_ptr<Mesh> mesh;                  // dp x cp
  const parallel::SeqLayout* layout = nullptr;  // this replica's sequence layout (cp > 1)
  long local_batch = 0;                         // sequences per step of this replica
  std::string attn_description = "local attention";
  ModelConfig mc;
  std::map<long, std::unique_ptr<data::TokenSource>> sources;  // by sequence length
  const data::TokenSource* source = nullptr;                   // of the current length
  long seq_len = 0;                                            // the current length
  std::unique_ptr<LlamaModel<T, Mem>> model;
  std::unique_ptr<ZeroState<T>> zero;  // the optimizer's state and where gradients go
  long step = 0;
  Watchdog* step_watchdog = nullptr;  // run()'s, while it trains

  TrainerImpl(Runtime& r, const Config& c, MPI_Comm cm) : rt(r), cfg(c), comm(cm) {
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    {  // no output replaces an input (rank 0 writes the outputs: its verdict for all), before anything is read
      const std::string task = cfg.get_string("data.task");
      const bool data_file = task == "text" || task == "bin" || task == "h5";
      check_problem_on_root(comm, rank == 0 ? outputs_replace_inputs_problem(
                                                  cfg.get_string("io.checkpoint"), cfg.get_string("io.run_log"),
                                                  {{"model.init_from", cfg.get_string("model.init_from")},
                                                   {"data.path", data_file ? cfg.get_string("data.path") : ""},
                                                   {"model.config", cfg.get_string("model.config")},
                                                   {"--config", cfg.file()}})
                                            : "");
    }
    mesh = Mesh::make(comm, rt.world(), int(cfg.get_int("parallel.cp")));
    BURST_CHECK_CONFIG(cfg.get_int("train.batch") % mesh->dp == 0, "train.batch = ", cfg.get_int("train.batch"),
                       " sequences must divide evenly over the ", mesh->dp, " data-parallel replicas (", size,
                       " ranks / parallel.cp = ", mesh->cp, ")");
    local_batch = cfg.get_int("train.batch") / mesh->dp;
    mc = cfg.get_string("model.config").empty() ? model_preset(cfg.get_string("model.preset"))
                                                : model_from_hf_file(cfg.get_string("model.config"));
    for (auto l : cfg.get_int_list("model.nope_layers"))
      if (mc.uses_rope(long(l))) mc.nope_layers.push_back(long(l));
    for (auto l : cfg.get_int_list("model.window_layers"))
      if (!mc.windowed(long(l))) mc.window_layers.push_back(long(l));
    if (cfg.get_int("model.sliding_window") > 0) mc.sliding_window = cfg.get_int("model.sliding_window");
    if (cfg.get_int("model.attn_log_scale") > 0) mc.attn_log_scale = cfg.get_int("model.attn_log_scale");
    // model.sliding_window sizes the window of the sliding-window layers (the
    // config's layer_types, or model.window_layers); with none it would
    // change nothing. train.attention_window windows every layer.
    BURST_CHECK_CONFIG(cfg.get_int("model.sliding_window") == 0 || !mc.window_layers.empty(), "model.sliding_window = ",
                       cfg.get_int("model.sliding_window"), " has no effect: ", mc.name,
                       " has no sliding-window layers; name them in model.window_layers (or use train.attention_window "
                       "for a window on every layer)");
    mc.validate();
    BURST_CHECK_CONFIG(cfg.get_int("train.seq_len") <= mc.max_position_embeddings * 64, "train.seq_len = ",
                       cfg.get_int("train.seq_len"), " is beyond what the model's positions were built for");
    BURST_CHECK_CONFIG(cfg.get_int("data.random_positions") <= mc.max_position_embeddings * 64, "data.random_positions = ",
                       cfg.get_int("data.random_positions"), " is beyond what the model's positions were built for");
    for (auto l : cfg.get_int_list("train.eval_seq_lens"))
      BURST_CHECK_CONFIG(l <= mc.max_position_embeddings * 64, "train.eval_seq_lens: ", l,
                         " is beyond what the model's positions were built for");
    ModelOptions mo;
    mo.policy = parse_act_policy(cfg.get_string("train.activation"));
    mo.loss_chunk = cfg.get_int("train.loss_chunk");
    policy = mo.policy;
    for (long len : run_lengths()) {
      sources[len] = data::make_source(cfg, mc.vocab, len);
      setups[len] = make_setup(len, {});
    }
    const long L0 = cfg.get_int("train.seq_len");
    check_host_memory_fits(L0, mo);
    model = std::make_unique<LlamaModel<T, Mem>>(mc, setups.at(L0).op, mo);
    use_length(L0);
    attn_description = setups.at(L0).description;
    const bool from_file = !cfg.get_string("model.init_from").empty();
    if (!from_file) init_params(model->params(), std::uint64_t(cfg.get_int("train.seed")), cfg.get_real("model.init_std"));
    zero = std::make_unique<ZeroState<T>>(*model, int(cfg.get_int("train.zero")), cfg.get_bool("train.offload"), comm);
    // Every rank reads the whole file (checksums verified, another model
    // refused) into the master weights (fp32 for a bf16 model: nothing
    // rounded away) and the model's copy; the ZeRO state was built on the
    // zero-filled parameters, all of which this replaces.
    if (from_file)
      zero->scatter_full("params", load_weights_flat<A>(cfg.get_string("model.init_from"), mc, model->params().table(),
                                                        model->params().size()));
    check_output_dir(cfg, "io.run_log", comm);
    check_output_dir(cfg, "io.checkpoint", comm);
    if (cfg.get_string("debug.fault") != "none")
      BURST_CHECK_CONFIG(cfg.get_int("debug.fault_rank") < size, "debug.fault_rank = ", cfg.get_int("debug.fault_rank"),
                         " is not a rank of this ", size, "-rank run");
    const std::string nan_tensor = cfg.get_string("debug.inject_nan_tensor");
    BURST_CHECK_CONFIG(std::any_of(model->params().table().begin(), model->params().table().end(),
                                   [&](const ParamInfo& p) { return p.name == nan_tensor; }),
                       "debug.inject_nan_tensor = '", nan_tensor, "' is not a parameter of ", mc.name);
  }

  // Attention of one process (cp = 1), or a distributed method over the cp
  // ranks of this replica, for sequences of `seq` tokens.
  struct LengthSetup {
    std::shared_ptr<AttentionOp<T, Mem>> op;
    const parallel::SeqLayout* layout = nullptr;
    std::string description = "local attention";
  };
  std::map<long, LengthSetup> setups;  // by sequence length (training, short curriculum, evaluation)

  // Switch the model, the task and the layout to sequences of `seq` tokens
  // (built at start-up for every length the run uses).
  void use_length(long seq) {
    use_setup(setups.at(seq));
    source = sources.at(seq).get();
    seq_len = seq;
  }
  void use_setup(const LengthSetup& ls) {
    model->set_attention(ls.op);
    layout = ls.layout;
  }

  // Packed documents under sequence parallelism: the layout and the mask
  // depend on the document lengths, so each distinct set gets its own
  // method (collective over the cp ranks, which share the sequence), kept
  // in a small cache. One document: the length's own setup.
  std::map<std::vector<long>, LengthSetup> doc_setups;
  const LengthSetup& setup_for(const data::Sequence& s) {
    const std::vector<long> docs = document_lengths(s);
    if (mesh->cp == 1 || docs.size() <= 1) return setups.at(long(s.tokens.size()));
    auto it = doc_setups.find(docs);
    if (it != doc_setups.end()) return it->second;
    return doc_setups[docs] = make_setup(long(s.tokens.size()), docs);
  }
  static std::vector<long> document_lengths(const data::Sequence& s) {
    std::vector<long> lens;
    for (size_t t = 0; t < s.doc_ids.size(); ++t) {
      if (t == 0 || s.doc_ids[t] != s.doc_ids[t - 1]) lens.push_back(0);
      ++lens.back();
    }
    return lens;
  }

  // Every length this run trains or evaluates at, with the setting that asks for it.
  std::vector<std::pair<long, const char*>> length_settings() const {
    std::vector<std::pair<long, const char*>> ls = {{cfg.get_int("train.seq_len"), "train.seq_len"}};
    if (cfg.get_int("train.short_steps") > 0) ls.emplace_back(cfg.get_int("train.short_seq_len"), "train.short_seq_len");
    for (auto l : cfg.get_int_list("train.eval_seq_lens")) ls.emplace_back(long(l), "train.eval_seq_lens");
    return ls;
  }
  // Every length this run trains or evaluates at.
  std::vector<long> run_lengths() const {
    std::vector<long> ls;
    for (const auto& setting : length_settings()) ls.push_back(setting.first);
    std::sort(ls.begin(), ls.end());
    ls.erase(std::unique(ls.begin(), ls.end()), ls.end());
    return ls;
  }
  long train_length(long at_step) const {
    return at_step < cfg.get_int("train.short_steps") ? cfg.get_int("train.short_seq_len") : cfg.get_int("train.seq_len");
  }
  std::vector<long> eval_lengths() const {
    std::vector<long> ls;
    for (auto l : cfg.get_int_list("train.eval_seq_lens")) ls.push_back(long(l));
    if (ls.empty()) ls.push_back(cfg.get_int("train.seq_len"));
    return ls;
  }

  ActPolicy policy = ActPolicy::Keep;
  LengthSetup make_setup(long seq, const std::vector<long>& docs) {
    LengthSetup ls;
    try {
      ls.op = make_attention_op(seq, docs, &ls.layout, &ls.description);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::Config) throw;
      throw Error(ErrorKind::Config, length_keys(seq) + ": " + e.message());  // which setting asked for this length
    }
    return ls;
  }
  // "at S tokens (the settings that ask for that length)", for an error about that length.
  std::string length_keys(long seq) const {
    std::string keys;
    std::set<std::string> named;  // an evaluation length listed twice is named once
    for (const auto& [l, key] : length_settings())
      if (l == seq && named.insert(key).second) keys += std::string(keys.empty() ? "" : ", ") + key;
    return "at " + std::to_string(seq) + " tokens" + (keys.empty() ? "" : " (" + keys + ")");
  }

  // docs: document lengths (empty: one document). The model's sliding-window
  // layers get a second op over the same layout with their window.
  std::shared_ptr<AttentionOp<T, Mem>> make_attention_op(long seq, const std::vector<long>& docs,
                                                         const parallel::SeqLayout** lay_out, std::string* description) {
    const double scale = 1.0 / std::sqrt(double(mc.head_dim));
    const long window = cfg.get_int("train.attention_window");
    std::vector<bool> windowed(size_t(mc.layers), false);
    for (long l : mc.window_layers) windowed[size_t(l)] = window == 0;  // train.attention_window rules every layer
    const bool per_layer = std::find(windowed.begin(), windowed.end(), true) != windowed.end();
    BURST_CHECK_CONFIG(!per_layer || docs.empty(), "the model's sliding-window layers with packed documents are not supported");
    if (mesh->cp == 1) {
      auto global = std::make_shared<LocalAttention<T, Mem>>(scale, window);
      if (!per_layer) return global;
      return std::make_shared<PerLayerAttention<T, Mem>>(
          global, std::make_shared<LocalAttention<T, Mem>>(scale, mc.sliding_window), windowed);
    }
    parallel::AttnOptions ao;
    ao.method = cfg.get_string("parallel.method");
    ao.ring = cfg.get_string("parallel.ring");
    ao.backward = cfg.get_string("parallel.backward");
    ao.partial_bf16 = cfg.get_string("parallel.partial") == "bf16";
    ao.inner = int(cfg.get_int("parallel.inner"));
    ao.hp = int(cfg.get_int("parallel.hp"));
    ao.placement = cfg.get_string("parallel.placement");
    ao.usp_inner = cfg.get_string("parallel.usp_inner");
    parallel::AttnProblem pb;
    pb.mask = window > 0 ? parallel::MaskSpec{parallel::MaskType::Window, window} : parallel::MaskSpec{parallel::MaskType::Causal, 0};
    if (!docs.empty()) {
      BURST_CHECK_CONFIG(window == 0, "train.attention_window with packed documents is not supported under sequence parallelism");
      pb.mask = parallel::MaskSpec{parallel::MaskType::Document, 0};
      pb.doc_lengths = docs;
    }
    const std::string lay = cfg.get_string("parallel.layout");
    pb.layout = lay != "auto"                ? parallel::parse_layout(lay)
                : policy == ActPolicy::Half  ? parallel::LayoutKind::Striped
                : !docs.empty()              ? parallel::LayoutKind::Document
                : window > 0                 ? parallel::LayoutKind::Contiguous
                                             : parallel::LayoutKind::Zigzag;
    pb.seq = seq;
    pb.heads = mc.heads, pb.kv_heads = mc.kv_heads, pb.head_dim = mc.head_dim, pb.scale = scale;
    auto sp = std::make_shared<SequenceParallelAttention<T>>(ao, pb, mesh, rt.topology(), policy == ActPolicy::Half);
    *lay_out = &sp->shards();
    *description = sp->method().describe();
    if (rank == 0 && sp->shards().padding() > 0)
      std::printf("layout %s pads %ld slots of %ld tokens over %d cp ranks\n", parallel::layout_name(pb.layout),
                  sp->shards().padding(), seq, mesh->cp);
    if (!per_layer) return sp;
    // The window layers: the same layout (the slots must agree), their mask.
    parallel::AttnProblem pw = pb;
    pw.mask = parallel::MaskSpec{parallel::MaskType::Window, mc.sliding_window};
    auto local = std::make_shared<SequenceParallelAttention<T>>(ao, pw, mesh, rt.topology(), policy == ActPolicy::Half);
    BURST_CHECK_CONFIG(local->shards().slot == sp->shards().slot, "the sliding-window layers' layout differs from the others'");
    *description += "; window layers: " + local->method().describe();
    return std::make_shared<PerLayerAttention<T, Mem>>(sp, local, windowed);
  }

  // This rank's slots of a sequence.
  LocalSequence local(const data::Sequence& s) const { return local_slots(layout, mesh->cp_rank, s); }

  // ------------------------------------------------------------ checkpoints
  // Collective: rank 0 writes (data-parallel replicas hold identical state),
  // and nobody returns before the file is in place. A checkpoint that could
  // not be written (disk full, ...) stops every rank with rank 0's Error(IO);
  // the earlier checkpoints are kept.
  void save_checkpoint(const std::string& path) {
    // Whole tensors, gathered from the ZeRO shards (collective).
    const std::vector<A> params = zero->gather_full("params"), mom = zero->gather_full("optim/m"),
                         var = zero->gather_full("optim/v");
    std::string failed;
    const double bound = cfg.get_real("io.checkpoint_timeout_s");
    // The write and the wait for it get their own bound, and messages that name it.
    if (step_watchdog) step_watchdog->arm_checkpoint(step, bound);
    if (rank == 0) {
      try {
        write_checkpoint(path, params, mom, var);
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::IO) throw;
        failed = e.message();
      }
    }
    // The other ranks wait here while rank 0 writes, bounded by
    // io.checkpoint_timeout_s: a timeout most likely means a write longer
    // than that.
    const std::string why = "for rank 0 to write the checkpoint of step " + std::to_string(step) +
                            ": rank 0 may still be writing it (io.checkpoint_timeout_s must exceed a checkpoint's write "
                            "time: raise it for a large model or a slow file system), or it died or stalls";
    int any_failed = 0;
    {
      CommTimeoutScope scope(bound, "io.checkpoint_timeout_s");
      any_failed = allreduce_op(int(!failed.empty()), MPI_MAX, comm, "checkpoint barrier", rank == 0 ? nullptr : why.c_str());
    }
    if (any_failed) throw Error(ErrorKind::IO, rank == 0 ? failed : "rank 0 could not write the checkpoint").set_collective();
  }

  // Into its step file through a temporary (a kill mid-write keeps every
  // earlier checkpoint), checked (io.verify_checkpoint) and synced to the
  // disk, renamed (the directory synced: a power loss leaves the new file
  // whole or the old ones), then published at `path` and the old ones
  // pruned. A write that fails removes the temporary and changes nothing
  // else; a failure once the step file is in place (its directory not
  // synced, `path` not moved to it) prunes nothing either.
  void write_checkpoint(const std::string& path, const std::vector<A>& params, const std::vector<A>& mom,
                        const std::vector<A>& var) {
    const std::string file = checkpoint_step_path(path, step);
    TempPath tmp(file);
    try {
      io::H5File f = io::H5File::create(tmp.path());
      auto write_all = [&](const std::string& group, const std::vector<A>& flat) {
        for (const ParamInfo& p : model->params().table()) {
          io::Dims dims(p.shape.begin(), p.shape.end());
          write_checked(f, group + "/" + p.name, flat.data() + p.offset, dims);
        }
      };
      write_all("params", params);
      write_all("optim/m", mom);
      write_all("optim/v", var);
      f.set_attr("/", "format_version", kCheckpointFormat);
      f.set_attr("/", "step", std::int64_t(step));
      f.set_attr("/", "seed", cfg.get_int("train.seed"));
      f.set_attr("/", "dtype", std::string(scalar_name<A>()));  // of the datasets: the masters
      f.set_attr("/", "train_dtype", std::string(scalar_name<T>()));
      f.set_attr("/", "model_config", model_to_hf_json(mc));
      f.set_attr("/", "train_config", cfg.dump());
      f.close();
      if (const double delay = cfg.get_real("debug.checkpoint_delay_s"); delay > 0)
        std::this_thread::sleep_for(std::chrono::duration<double>(delay));
      verify_checkpoint(tmp.path());
      tmp.publish();  // the new name on the disk before ck.h5 moves to it and older files go
    } catch (const Error& e) {
      if (tmp.in_place())  // renamed, but its directory not synced
        BURST_FAIL(ErrorKind::IO, "the checkpoint of step ", step, ": ", e.message(), "; '", path,
                   "' is not moved to it and the older checkpoints are kept (none removed); fix the cause and continue "
                   "with --resume");
      const auto kept = list_step_checkpoints(path);
      BURST_FAIL(ErrorKind::IO, "the checkpoint of step ", step, " could not be written: ", e.message(),
                 "; the temporary file is removed and the earlier checkpoints are kept (",
                 kept.empty() ? std::string("there are none") : "the newest: '" + kept.front().second + "'",
                 "); make room (or fix the cause) and continue with --resume");
    }
    try {
      publish_checkpoint(file, path);
    } catch (const Error& e) {
      BURST_FAIL(ErrorKind::IO, "the checkpoint of step ", step, " is in place at '", file, "' (synced); pointing '",
                 path, "' at it: ", e.message(),
                 "; the older checkpoints are kept (none removed); fix the cause and continue with --resume");
    }
    prune_checkpoints(path, cfg.get_int("io.keep_last"), step);
  }

  // A written checkpoint reopened and checked as io.verify_checkpoint says
  // (checkpoint_files.hpp): its root attributes and every dataset's
  // structure, or also every dataset against its checksum (Error(IO) naming
  // the first that fails).
  void verify_checkpoint(const std::string& file) {
    const CheckpointVerify how = parse_checkpoint_verify(cfg.get_string("io.verify_checkpoint"));
    if (how == CheckpointVerify::Off) return;
    io::H5File f = io::H5File::open(file);
    BURST_CHECK_IO(f.has_attr("/", "format_version") && f.attr_int("/", "format_version") == kCheckpointFormat &&
                       f.has_attr("/", "step") && f.attr_int("/", "step") == step,
                   "checkpoint '", file, "' read back without its format_version or step");
    std::vector<DatasetSpec> expected;
    for (const char* group : {"params", "optim/m", "optim/v"})
      for (const ParamInfo& p : model->params().table())
        expected.push_back({std::string(group) + "/" + p.name, io::Dims(p.shape.begin(), p.shape.end()), scalar_name<A>()});
    verify_datasets(f, expected, how);
  }

  // Throws Error(IO) when the file is damaged (unreadable, a dataset missing
  // or failing its checksum) and Error(Input) when it is whole but not for
  // this run (another format or model).
  // `named_step`: the step in the file's name when it is one of the
  // rotation's step files (-1 when not); the step it holds must be that one.
  void load_checkpoint(const std::string& path, long named_step) {
    io::H5File f = io::H5File::open(path);
    BURST_CHECK_INPUT(f.has_attr("/", "format_version"), "'", path, "' is not a checkpoint (no format_version)");
    const std::int64_t version = f.attr_int("/", "format_version");
    BURST_CHECK_INPUT(version == kCheckpointFormat, "checkpoint '", path, "' has format_version ", version,
                      "; this build reads ", kCheckpointFormat);
    const std::string theirs = f.attr_string("/", "model_config"), ours = model_to_hf_json(mc);
    BURST_CHECK_INPUT(theirs == ours, "checkpoint '", path, "' holds another model: ",
                      model_from_hf_json(theirs, path).describe(), "; this run is ", mc.describe());
    // The step is outside the tensors' checksums: checked against what it can be
    // (a step of -5 once reached the schedule as map::at; another than the
    // name's resumed the wrong step). A damaged file: --resume falls back.
    const std::int64_t saved_step = f.attr_int("/", "step");
    BURST_CHECK_IO(saved_step >= 0, "checkpoint '", path, "' holds step ", saved_step, " (a damaged file)");
    BURST_CHECK_IO(named_step < 0 || saved_step == named_step, "checkpoint '", path, "' holds step ", saved_step,
                   " where its name says ", named_step, " (a damaged or edited file)");
    // Whole tensors, each rank keeping its ZeRO shard of them.
    auto read_all = [&](const std::string& group) {
      std::vector<A> flat(static_cast<size_t>(model->params().size()));
      for (const ParamInfo& p : model->params().table()) {
        const std::string name = group + "/" + p.name;
        if (f.exists(name)) {  // the shape before the values (a damaged file may declare [2^40])
          const io::Dims d = f.dims(name);
          BURST_CHECK_INPUT(d == io::Dims(p.shape.begin(), p.shape.end()), "checkpoint '", path, "': ", name, " is ",
                            io::dims_string(d), ", expected ", io::dims_string(io::Dims(p.shape.begin(), p.shape.end())));
        }
        std::vector<A> x = read_checked<A>(f, name);
        BURST_CHECK_INPUT(long(x.size()) == p.size, "checkpoint '", path, "': ", name, " has ", x.size(),
                          " values, expected ", p.size);
        std::copy(x.begin(), x.end(), flat.begin() + p.offset);
      }
      return flat;
    };
    const std::vector<A> params = read_all("params"), mom = read_all("optim/m"), var = read_all("optim/v");
    zero->scatter_full("params", params);
    zero->scatter_full("optim/m", mom);
    zero->scatter_full("optim/v", var);
    step = long(saved_step);
    loaded_train_config = f.has_attr("/", "train_config") ? f.attr_string("/", "train_config") : "";
  }
  std::string loaded_train_config;  // the checkpoint's run settings (Config::dump), read by load_checkpoint

  // The settings of this run that differ from the checkpoint's run, as
  // "key old -> new" (those that change the trajectory; not train.steps, the
  // parallel layout, the files, the logging, the bounds, the debug faults).
  std::string changed_settings(const std::string& theirs) const {
    const auto parse = [](const std::string& dump) {
      std::map<std::string, std::string> kv;
      std::istringstream in(dump);
      for (std::string line; std::getline(in, line);)
        if (const size_t eq = line.find(" = "); eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 3);
      return kv;
    };
    const auto free_to_change = [](const std::string& k) {
      for (const char* prefix : {"io.", "comm.", "debug.", "parallel.", "train.eval_"})
        if (k.rfind(prefix, 0) == 0) return true;
      return k == "train.steps" || k == "train.log_every" || k == "train.zero" || k == "train.offload";
    };
    const auto old_kv = parse(theirs), new_kv = parse(cfg.dump());
    std::string out;
    for (const auto& [k, v] : new_kv) {
      const auto it = old_kv.find(k);
      if (free_to_change(k) || it == old_kv.end() || it->second == v) continue;
      out += (out.empty() ? "" : ", ") + k + " " + it->second + " -> " + v;
    }
    return out;
  }

  // The outcome of a step every rank took on its own (reading a
  // checkpoint), agreed over `comm`: every rank calls it, failed or not
  // (collective, bounded by comm.timeout_s). The graver failure wins (a
  // damaged file, Error(IO), is less grave than any other: --resume falls
  // back from it), and among equals the lowest rank's; its kind and message
  // ("rank k: ..." when k is not rank 0) go to every rank, so that all raise
  // the same error at once and the job ends with one message and its status
  // (an error raised alone, or minutes apart after long reads, missed the
  // exit's 10 s agreement: a line per rank and MPI_Abort).
  struct Outcome {
    int gravity = 0;  // 0 done, 1 Error(IO), 2 any other Error
    ErrorKind kind = ErrorKind::Internal;
    std::string message;
  };
  Outcome agree(const Outcome& mine, const char* what) {
    struct {
      int gravity, rank;
    } in{mine.gravity, rank}, out{0, 0};
    MPI_Request req;
    MPI_Iallreduce(&in, &out, 1, MPI_2INT, MPI_MAXLOC, comm, &req);
    wait_bounded(req, what, std::int64_t(sizeof in));
    Outcome o;
    o.gravity = out.gravity;
    if (o.gravity == 0) return o;
    const int root = out.rank;
    int head[2] = {int(mine.kind), int(mine.message.size())};
    MPI_Ibcast(head, 2, MPI_INT, root, comm, &req);
    wait_bounded(req, what, std::int64_t(sizeof head));
    o.kind = ErrorKind(head[0]);
    std::string msg = rank == root ? mine.message : std::string(size_t(head[1]), ' ');
    if (head[1] > 0) {
      MPI_Ibcast(&msg[0], head[1], MPI_CHAR, root, comm, &req);
      wait_bounded(req, what, head[1]);
    }
    o.message = root == 0 ? msg : "rank " + std::to_string(root) + ": " + msg;
    return o;
  }

  // Rank 0's strings on every rank (bounded like every collective here).
  std::vector<std::string> from_rank0(const std::vector<std::string>& mine, const char* what) {
    std::string joined;
    if (rank == 0)
      for (const std::string& x : mine) joined += x + '\0';
    long n = long(joined.size());
    MPI_Request req;
    MPI_Ibcast(&n, 1, MPI_LONG, 0, comm, &req);
    wait_bounded(req, what, std::int64_t(sizeof n));
    joined.resize(size_t(n));
    if (n > 0) {
      MPI_Ibcast(&joined[0], int(n), MPI_CHAR, 0, comm, &req);
      wait_bounded(req, what, n);
    }
    std::vector<std::string> out;
    for (size_t b = 0, e; b < joined.size(); b = e + 1) out.push_back(joined.substr(b, (e = joined.find('\0', b)) - b));
    return out;
  }

  // The newest checkpoint every rank reads whole; a damaged one is reported
  // and the previous one tried. Another model or format stops the run. The
  // ranks agree on each attempt, whatever it threw, before any goes on.
  void resume_from(const std::string& path) {
    // Every rank tries rank 0's candidates in rank 0's order: each listing
    // its own directory (node-local storage, a file system still settling)
    // could differ, and the ranks would then load different checkpoints at
    // the same attempt or leave the loop at different attempts. A rank that
    // cannot read one of them fails that attempt (falling back, as for a
    // damaged file).
    const std::vector<std::string> cands = from_rank0(resume_candidates(path), "checkpoint list");
    if (cands.empty() && rank == 0) std::printf("no checkpoint at %s: starting from step 0\n", path.c_str());
    std::string failures;
    for (size_t i = 0; i < cands.size(); ++i) {
      Outcome mine;
      try {
        load_checkpoint(cands[i], step_in_checkpoint_name(cands[i], path));
      } catch (const Error& e) {
        mine = {e.kind() == ErrorKind::IO ? 1 : 2, e.kind(), e.message()};
      } catch (const std::exception& e) {  // (std::bad_alloc, ...): as grave, agreed all the same
        mine = {2, ErrorKind::Internal, std::string("reading checkpoint '") + cands[i] + "': " + e.what()};
      }
      const Outcome all = agree(mine, "checkpoint agreement");
      if (all.gravity == 0) {
        // The same name may hold different files on different nodes: the steps must agree.
        const long lo = allreduce_min(step, comm, "checkpoint step agreement"),
                   hi = allreduce_max(step, comm, "checkpoint step agreement");
        if (lo != hi)
          throw Error(ErrorKind::Input, "checkpoint '" + cands[i] + "' holds different steps on different ranks (" +
                                            std::to_string(lo) + " to " + std::to_string(hi) +
                                            "): every rank must read the same checkpoint (a shared file system)")
              .set_collective();
        if (rank == 0) {
          std::printf("resumed from checkpoint '%s' at step %ld\n", cands[i].c_str(), step);
          // Allowed (a lower learning rate, another task to fine-tune on), but
          // then not the run the checkpoint's would have been: said, not silent.
          if (const std::string changed = changed_settings(loaded_train_config); !changed.empty()) {
            std::fprintf(stderr,
                         "burst: warning: resuming with settings other than the checkpoint's run: %s; the run goes "
                         "on with the new ones (not the run the checkpoint's would have continued bit for bit)\n",
                         changed.c_str());
            std::fflush(stderr);
          }
        }
        return;
      }
      if (all.gravity == 2) throw Error(all.kind, all.message).set_collective();
      const std::string& why = all.message;
      failures += (failures.empty() ? "" : "; ") + why;
      if (rank == 0 && i + 1 < cands.size()) {  // the last one's failure is in the error below
        std::fprintf(stderr, "burst: warning: %s; falling back to the previous checkpoint '%s'\n", why.c_str(),
                     cands[i + 1].c_str());
        std::fflush(stderr);
      }
    }
    BURST_CHECK_INPUT(cands.empty(), "no usable checkpoint for io.checkpoint = '", path, "': ", failures);
  }

  // ------------------------------------------------------------ evaluation
  // Answer-token loss and accuracy (argmax, teacher forcing) on held-out sequences.
  std::pair<double, double> evaluate() {
    const long nseq = cfg.get_int("train.eval_sequences");
    double loss = 0, correct = 0, count = 0;
    // Sequences over the replicas; each cp rank scores its own slots.
    // Every replica makes the same number of forward passes (ZeRO-3 gathers
    // parameters collectively); a replica past the end re-scores nothing.
    for (long r = 0; r < (nseq + mesh->dp - 1) / mesh->dp; ++r) {
      const long i = r * mesh->dp + mesh->dp_rank;
      const bool score = i < nseq;
      const data::Sequence full = source->make(std::uint64_t(cfg.get_int("train.seed")), 1, std::uint64_t(score ? i : 0));
      use_setup(setup_for(full));
      const LocalSequence s = local(full);
      const long slots = long(s.tokens.size());
      Kokkos::View<T**, Layout, Mem> logits(mem_label(MemCategory::Activations, "eval.logits"), slots, mc.vocab);
      model->forward_logits(to_device(s), logits);
      auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), logits);
      for (long t = 0; t < slots && score; ++t) {
        if (s.labels[t] == kernels::kIgnoreIndex) continue;
        double mx = h(t, 0);
        long arg = 0;
        for (long c = 1; c < mc.vocab; ++c)
          if (h(t, c) > mx) mx = h(t, c), arg = c;
        double z = 0;
        for (long c = 0; c < mc.vocab; ++c) z += std::exp(double(h(t, c)) - mx);
        loss += mx + std::log(z) - double(h(t, s.labels[t]));
        correct += arg == s.labels[t] ? 1 : 0;
        count += 1;
      }
    }
    loss = allreduce_sum(loss, comm, "evaluation all-reduce");
    correct = allreduce_sum(correct, comm, "evaluation all-reduce");
    count = allreduce_sum(count, comm, "evaluation all-reduce");
    return {loss / count, correct / count};
  }

  // ------------------------------------------------------------ one step
  struct StepStats {
    double loss, grad_norm, lr;
    long tokens;
    std::string nonfinite;  // what was not finite ("" = all finite); then no update was made
  };

  // debug.fault and debug.inject_nan_*: faults on purpose, mid-step (after
  // backward, before the gradient all-reduce), for the reliability tests.
  void inject_faults() {
    const std::string fault = cfg.get_string("debug.fault");
    if (fault != "none" && step == cfg.get_int("debug.fault_step") && rank == cfg.get_int("debug.fault_rank")) {
      std::fprintf(stderr, "burst: debug.fault = %s on rank %d at step %ld\n", fault.c_str(), rank, step);
      std::fflush(stderr);
      if (fault == "kill") std::raise(SIGKILL);
      if (fault == "stop") std::raise(SIGSTOP);
      while (fault == "hang") sleep(1);
    }
    if (step == cfg.get_int("debug.inject_nan_step")) zero->inject_nan(cfg.get_string("debug.inject_nan_tensor"));
  }

  // The first tensor whose (all-reduced, so global) gradient is not finite.
  std::string nonfinite_tensor() { return zero->first_nonfinite(); }

  StepStats train_step(PhaseTimes& times) {
    const long batch = local_batch;
    use_length(train_length(step));
    const std::uint64_t seed = std::uint64_t(cfg.get_int("train.seed"));
    if (doc_setups.size() > 64) doc_setups.clear();  // (not mid-step: the step keeps pointers into it)
    std::vector<LocalSequence> seqs;
    std::vector<const LengthSetup*> seq_setups;
    long valid = 0;
    {
      Phase ph("data", &times);
      for (long b = 0; b < batch; ++b) {
        // The same global sequence set whatever the rank count and mesh.
        const std::uint64_t idx = std::uint64_t((step * mesh->dp + mesh->dp_rank) * batch + b);
        const data::Sequence full = source->make(seed, 0, idx);
        seq_setups.push_back(&setup_for(full));
        use_setup(*seq_setups.back());
        seqs.push_back(local(full));
        for (auto l : seqs.back().labels) valid += l != kernels::kIgnoreIndex ? 1 : 0;
      }
    }
    // The mean is over the valid tokens of the whole step, on every replica.
    const long global_valid = allreduce_sum(valid, comm, "token-count all-reduce");
    zero->zero_grads();
    double loss_sum = 0;
    {
      Phase ph("forward_backward", &times, true);
      for (size_t i = 0; i < seqs.size(); ++i) {
        use_setup(*seq_setups[i]);
        loss_sum += model->forward_backward(to_device(seqs[i]), double(global_valid)).sum;
      }
    }
    inject_faults();
    {
      Phase ph("grad_allreduce", &times, true);
      zero->finish_grads();
    }
    loss_sum = allreduce_sum(loss_sum, comm, "loss all-reduce");
    Phase ph("optimizer", &times, true);
    const double norm = zero->grad_norm();
    const double lr = kernels::cosine_lr(step, cfg.get_int("train.warmup"), cfg.get_int("train.steps"),
                                         cfg.get_real("train.lr"), cfg.get_real("train.min_lr"));
    const long tokens = batch * seq_len * mesh->dp;  // of the step, all ranks
    // Both values are global (after the all-reduce), so every rank takes
    // this branch at the same step.
    if (!std::isfinite(norm) || !std::isfinite(loss_sum))
      return {loss_sum / double(global_valid), norm, lr, tokens, nonfinite_tensor()};
    const double clip = kernels::clip_factor(norm, cfg.get_real("train.grad_clip"));
    kernels::AdamWParams hp{lr, cfg.get_real("train.beta1"), cfg.get_real("train.beta2"), cfg.get_real("train.eps"),
                            cfg.get_real("train.weight_decay")};
    zero->step(hp, step + 1, clip);
    return {loss_sum / double(global_valid), norm, lr, tokens, ""};
  }

  // train.on_nonfinite, for a step whose loss or gradient norm was not
  // finite (train_step made no update; the values are global, so every rank
  // is here at the same step). abort: a checkpoint of the state before the
  // step, then a collective error (exit 3). skip: counted, and on we go.
  void on_nonfinite_step(const StepStats& st, const std::string& ckpt, io::RunLog* log, TrainResult& res) {
    const std::string what = "step " + std::to_string(step) + ": " + st.nonfinite + " is not finite (loss " +
                             std::to_string(st.loss) + ", gradient norm " + std::to_string(st.grad_norm) + ")";
    if (cfg.get_string("train.on_nonfinite") == "abort") {
      if (!ckpt.empty()) save_checkpoint(ckpt);
      if (log) log->append({{"step", double(step)}, {"loss", st.loss}, {"grad_norm", st.grad_norm}, {"skipped", 1}});
      const std::string saved =
          ckpt.empty() ? "no checkpoint (io.checkpoint is empty)" : "checkpoint of the state before it in '" + ckpt + "'";
      throw Error(ErrorKind::Numeric, what + "; " + saved + "; stopping (train.on_nonfinite = abort)").set_collective();
    }
    ++res.skipped_steps;
    if (rank == 0) std::printf("%s; skipped, %ld so far (train.on_nonfinite = skip)\n", what.c_str(), res.skipped_steps);
  }

  // The analytic model's input for a step at sequence length `len` (its
  // layout `lay`) with `mo`'s activation policy and loss chunk.
  MemoryModelInput memory_input(long len, const parallel::SeqLayout* lay, const ModelOptions& mo, int zero_stage) const {
    MemoryModelInput in;
    in.model = mc;
    in.slots = lay ? lay->local : len;
    in.scalar_bytes = int(sizeof(T));
    in.accum_bytes = int(sizeof(A));
    in.policy = mo.policy;
    in.loss_chunk = mo.loss_chunk;
    in.zero_stage = zero_stage;
    in.world = size;
    // Every op the run holds keeps its packets; the step measured runs only
    // the ops of the current length (or of its document sets).
    auto add = [&](const LengthSetup& su, bool runs) {
      const CommBuffers b = su.op->comm_buffers();
      in.attention.persistent += b.persistent;
      if (runs) in.attention.transient = std::max(in.attention.transient, b.transient);
    };
    for (const auto& [l, su] : setups) add(su, l == len);
    for (const auto& [docs, su] : doc_setups) add(su, true);
    return in;
  }

  // A run whose analytic memory (train/memory_model.hpp, within a few per
  // cent of the measured peaks) exceeds what this host's ranks may use
  // together is refused before the model is allocated: a host build on a
  // machine that overcommits memory was otherwise killed (SIGKILL, no
  // message) a minute in. Device memory is not checked here: an allocation
  // beyond it is Kokkos' error, raised at once.
  void check_host_memory_fits(long len, const ModelOptions& mo) {
    if constexpr (!Kokkos::SpaceAccessibility<Kokkos::HostSpace, Mem>::accessible) {
      (void)len, (void)mo;
    } else {
      const MemoryEstimate est = estimate_memory(memory_input(len, setups.at(len).layout, mo, int(cfg.get_int("train.zero"))));
      double mine = 0;
      for (std::int64_t b : est.bytes) mine += double(b);
      MPI_Comm host;  // the ranks sharing this host's memory
      MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host);
      const double together = allreduce_sum(mine, host, "host memory check");
      int here = 1;
      MPI_Comm_size(host, &here);
      MPI_Comm_free(&host);
      const std::uint64_t limit = io::process_memory_limit();
      // The most crowded host decides for every rank (rank 0 words it).
      const double over = allreduce_max(limit > 0 ? together / double(limit) : 0.0, comm, "host memory check");
      const int most = int(allreduce_max(double(here), comm, "host memory check"));
      const auto whole = [](double b) { return std::int64_t(std::min(b, 9e18)); };
      const std::string why =
          over <= 1 ? ""
                    : "the run needs about " + format_bytes(whole(over * double(limit))) +
                          " of host memory (the analytic model, train/memory_model.hpp: " + est.report() +
                          (most > 1 ? " per rank, x " + std::to_string(most) + " ranks on a host" : "") + "), more than the " +
                          format_bytes(whole(double(limit))) +
                          " this process may use: a smaller model or train.seq_len, train.activation = whole, or train.zero = 3 "
                          "over ranks on more hosts";
      check_problem_on_root(comm, why);
    }
  }

  // The measured peaks of the first step beside the analytic model's.
  void report_memory(const MemCounters& mem, io::H5File* logf) {
    const MemoryEstimate est = estimate_memory(memory_input(seq_len, layout, model->options(), zero->stage()));
    if (rank != 0) return;
    std::string measured;
    for (MemCategory c : {MemCategory::Params, MemCategory::Grads, MemCategory::Optimizer, MemCategory::Activations,
                          MemCategory::Comm, MemCategory::Workspace})
      measured += (measured.empty() ? "" : ", ") + std::string(mem_category_name(c)) + " " + format_bytes(mem.peak[int(c)]);
    std::printf("memory per rank, first step: measured peak %s\n                  analytic model %s (work buffers: "
                "measured only)\n",
                measured.c_str(), est.report().c_str());
    if (logf)
      for (int c = 0; c < kMemCategories; ++c)
        if (est.bytes[size_t(c)] > 0)
          logf->set_attr("/", std::string("mem_model_") + mem_category_name(MemCategory(c)), double(est.bytes[size_t(c)]));
  }

  TrainResult run(bool resume) {
    const std::string ckpt = cfg.get_string("io.checkpoint");
    set_comm_timeout(cfg.get_real("comm.timeout_s"));
    {  // the run's files against an earlier run's (rank 0 writes them): before any work
      const std::string lp = cfg.get_string("io.run_log");
      const bool overwrite = cfg.get_bool("io.overwrite");
      check_problem_on_root(comm, rank == 0 ? run_outputs_problem(ckpt, lp, resume, overwrite) : "");
      if (rank == 0 && overwrite && !resume && !ckpt.empty()) remove_checkpoint_files(ckpt);
      // A run log to continue must be one (readable, and a run log, not a checkpoint copied there): bad input.
      try {
        check_problem_on_root(comm, rank == 0 && resume && !lp.empty() ? io::resume_run_log_problem(lp) : "");
      } catch (const Error& e) {
        throw Error(ErrorKind::Input, e.message());
      }
    }
    if (resume) {
      BURST_CHECK_CONFIG(!ckpt.empty(), "--resume needs io.checkpoint");
      resume_from(ckpt);
    }
    const long steps = cfg.get_int("train.steps");
    if (resume && step >= steps && rank == 0)
      std::printf("nothing to train: the checkpoint is at step %ld and train.steps = %ld (raise train.steps to go on)\n", step,
                  steps);
    std::unique_ptr<io::H5File> logf;
    std::unique_ptr<io::RunLog> log;
    bool appends = false;  // a resumed run appends to its run log (and keeps it whatever happens)
    if (rank == 0 && !cfg.get_string("io.run_log").empty()) {
      const std::string lp = cfg.get_string("io.run_log");
      appends = resume && std::filesystem::exists(lp);
      logf = std::make_unique<io::H5File>(appends ? io::H5File::open(lp, io::H5File::Mode::ReadWrite) : io::H5File::create(lp));
      log = std::make_unique<io::RunLog>(*logf);
      // Steps after the checkpoint run again: drop their rows (a kill can
      // land between a step's row and its checkpoint).
      if (resume && logf->exists("log/step")) {
        const std::vector<double> logged = logf->read<double>("log/step");
        const auto first_rerun = std::find_if(logged.begin(), logged.end(), [&](double x) { return x >= double(step); });
        log->truncate(std::uint64_t(first_rerun - logged.begin()));
      }
      logf->set_attr("/", "content", std::string(io::kRunLogContent));  // what --resume checks before appending
      logf->set_attr("/", "model", mc.describe());
      logf->set_attr("/", "config", cfg.dump());
      logf->set_attr("/", "flop_convention", std::string("paper (ALGORITHMS.md section 9), forward + backward"));
      logf->set_attr("/", "peak_gflops", 224.0);
      logf->set_attr("/", "peak_source", std::string("OpenBLAS sgemm 2048^3 on this 2-core CPU (PLATFORM.md)"));
      logf->set_attr("/", "ranks", std::int64_t(size));
      logf->set_attr("/", "dp", std::int64_t(mesh->dp));
      logf->set_attr("/", "cp", std::int64_t(mesh->cp));
      logf->set_attr("/", "attention", mesh->cp > 1 ? cfg.get_string("parallel.method") : std::string("local"));
      logf->set_attr("/", "activation", cfg.get_string("train.activation"));
      logf->set_attr("/", "loss_chunk", cfg.get_int("train.loss_chunk"));
      logf->set_attr("/", "zero", cfg.get_int("train.zero"));
      logf->flush();  // a run killed before its first row still leaves a run log --resume recognises
    }
    // A run that fails before its first row (bad input found late: the mask
    // of the first batch's data, an evaluation length) leaves no new run log:
    // an empty one would hold no data and only make the corrected rerun
    // refuse to replace "an earlier run's" log. A resumed run's log is kept.
    struct EmptyNewRunLog {
      std::unique_ptr<io::H5File>& f;
      std::unique_ptr<io::RunLog>& l;
      std::string path;
      int uncaught = std::uncaught_exceptions();
      ~EmptyNewRunLog() {
        if (path.empty() || !l || l->rows() > 0 || std::uncaught_exceptions() <= uncaught) return;
        l.reset(), f.reset();
        std::error_code ec;
        std::filesystem::remove(path, ec);
      }
    } empty_new_log{logf, log, logf && !appends ? cfg.get_string("io.run_log") : std::string()};
    if (rank == 0) {
      std::printf("model %s\n", mc.describe().c_str());
      if (cfg.get_int("train.short_steps") > 0)
        std::printf("curriculum: the first %ld steps on %ld tokens\n", cfg.get_int("train.short_steps"),
                    cfg.get_int("train.short_seq_len"));
      const double chance = source->chance_loss();
      char chance_s[64] = "no chance loss: natural data";
      if (std::isfinite(chance)) std::snprintf(chance_s, sizeof chance_s, "chance loss %.3f", chance);
      std::printf("data %s: %ld tokens per sequence (%s); %d replica(s) x %ld sequences per step\n",
                  source->describe().c_str(), cfg.get_int("train.seq_len"), chance_s, mesh->dp, local_batch);
      if (mesh->cp > 1)
        std::printf("sequence parallel: %d ranks per sequence, %s (%s), activation %s, loss chunk %ld\n", mesh->cp,
                    cfg.get_string("parallel.method").c_str(), attn_description.c_str(),
                    cfg.get_string("train.activation").c_str(), cfg.get_int("train.loss_chunk"));
      std::fflush(stdout);
    }
    const long log_every = cfg.get_int("train.log_every"), eval_every = cfg.get_int("train.eval_every");
    const long ckpt_every = cfg.get_int("io.checkpoint_every");
    TrainResult res;
    Timer wall;
    const long start = step;
    const long stop_after = cfg.get_int("train.stop_after");
    const long stop_at = stop_after > 0 ? std::min(steps, start + stop_after) : steps;
    StopSignals signals;
    Watchdog watchdog(cfg.get_real("comm.timeout_s"), rank, cfg.get_real("io.checkpoint_timeout_s"));
    step_watchdog = &watchdog;
    struct Forget {  // the watchdog goes with this scope
      Watchdog*& w;
      ~Forget() { w = nullptr; }
    } forget{step_watchdog};
    while (step < stop_at) {
      watchdog.arm(step);
      PhaseTimes times;
      MemoryTracker::global().reset_peaks();
      const double cpu0 = process_cpu_seconds(), wait0 = CommStats::get().wait_seconds();
      Timer t;
      StepStats st = train_step(times);
      const double secs = t.seconds();
      const double cpu_secs = process_cpu_seconds() - cpu0;  // this rank's CPU time: < secs when cores are shared
      const double wait_secs = CommStats::get().wait_seconds() - wait0;  // blocked in waits and blocking collectives
      if (!st.nonfinite.empty()) on_nonfinite_step(st, ckpt, log.get(), res);
      ++step;
      res.last_loss = st.loss;
      std::vector<std::pair<std::string, double>> row = {
          {"step", double(step - 1)}, {"loss", st.loss}, {"lr", st.lr}, {"grad_norm", st.grad_norm},
          {"skipped", st.nonfinite.empty() ? 0.0 : 1.0}, {"seconds", secs}, {"cpu_seconds", cpu_secs},
          {"comm_wait_seconds", wait_secs},
          {"tokens_per_s", double(st.tokens) / secs}};
      const double peak_gflops = cfg.get_real("train.peak_tflops") > 0 ? cfg.get_real("train.peak_tflops") * 1e3
                                 : std::is_same<DeviceMem, Kokkos::HostSpace>::value ? 224.0
                                                                                     : 989e3;
      const double flops_per_seq = paper_flops(mc, double(seq_len), true);
      const double gflops = flops_per_seq * double(local_batch) / double(mesh->cp) / secs / 1e9;  // per rank
      row.push_back({"gflops_per_rank", gflops});
      row.push_back({"mfu", gflops / peak_gflops});
      const auto mem = MemoryTracker::global().counters(std::is_same<DeviceMem, Kokkos::HostSpace>::value ? MemSpaceKind::Host
                                                                                                       : MemSpaceKind::Device);
      for (int c = 0; c < kMemCategories; ++c)
        row.push_back({std::string("mem_peak_") + mem_category_name(MemCategory(c)), double(mem.peak[c])});
      if (step - 1 == start) report_memory(mem, logf.get());
      for (auto& [name, ps] : times.table()) row.push_back({"time_" + name, ps.seconds});
      const bool do_eval = (eval_every > 0 && step % eval_every == 0) || step == steps;
      std::string eval_line;
      if (do_eval) {
        // At every evaluation length; eval_loss / eval_accuracy are the worst of them.
        res.eval_loss = -1, res.eval_accuracy = 2;
        for (long len : eval_lengths()) {
          use_length(len);
          auto [el, ea] = evaluate();
          res.eval_loss = std::max(res.eval_loss, el), res.eval_accuracy = std::min(res.eval_accuracy, ea);
          row.push_back({"eval_loss_" + std::to_string(len), el});
          row.push_back({"eval_accuracy_" + std::to_string(len), ea});
          char buf[96];
          std::snprintf(buf, sizeof buf, " | %s@%ld loss %.4f acc %.3f", source->heldout() ? "held-out" : "eval (training data)",
                        len, el, ea);
          eval_line += buf;
        }
        row.push_back({"eval_loss", res.eval_loss});
        row.push_back({"eval_accuracy", res.eval_accuracy});
      }
      if (log) log->append(row);
      if (rank == 0 && (step % log_every == 0 || step == steps || do_eval)) {
        const double done = double(step - start), eta = wall.seconds() / done * double(stop_at - step);
        const int bar = int(20.0 * double(step) / double(steps));  // the line still starts with "step" (scripts read it)
        std::printf("step %6ld/%ld [%s%s] | loss %.4f | lr %.2e | |g| %.3f | %.0f tok/s | ETA %.0fs", step, steps,
                    std::string(size_t(bar), '#').c_str(), std::string(size_t(20 - bar), '.').c_str(), st.loss, st.lr,
                    st.grad_norm, double(st.tokens) / secs, eta);
        std::printf("%s", eval_line.c_str());
        std::printf("\n");
        std::fflush(stdout);
      }
      // A stop signal on any rank stops every rank after this same step.
      const int sig = allreduce_max(StopSignals::signal_number(), comm, "stop-signal agreement");
      if (!ckpt.empty() && ((ckpt_every > 0 && step % ckpt_every == 0) || step == stop_at || sig != 0)) save_checkpoint(ckpt);
      if (sig != 0) {
        res.stopped_by_signal = true;
        if (rank == 0) {
          const std::string saved = ckpt.empty() ? "no checkpoint (io.checkpoint is empty)"
                                                 : "checkpoint '" + ckpt + "' written; continue with --resume";
          std::printf("%s received: stopped after step %ld of %ld; %s\n", StopSignals::name(sig), step, steps, saved.c_str());
        }
        break;
      }
    }
    watchdog.disarm();
    if (logf) logf->close();  // a run log that cannot be completed is an error, not a silent loss
    res.steps_done = step;
    return res;
  }
};

}  // namespace

TrainResult train(Runtime& rt, const Config& cfg, bool resume, MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) comm = rt.world();
  if (cfg.get_string("train.dtype") == "double") return TrainerImpl<double>(rt, cfg, comm).run(resume);
  if (cfg.get_string("train.dtype") == "bf16") return TrainerImpl<bf16>(rt, cfg, comm).run(resume);
  return TrainerImpl<float>(rt, cfg, comm).run(resume);
}

}  // namespace burst
