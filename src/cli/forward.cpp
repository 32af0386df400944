// burst forward: logits (and optionally the hidden states) of the LLaMA
// model for each token row of an HDF5 file, with weights from our HDF5
// weights or checkpoint (train/weights.hpp).
//   tokens  [s] or [b, s] (any integer type)  ->  logits [s, V] or [b, s, V]
//   --hidden-states: hidden_states [L+1, s, H] or [b, L+1, s, H], in
//   Hugging Face's order (embeddings, each layer's output, the last one
//   after the final norm).
#include "cli/commands.hpp"
#include "cli/model_arg.hpp"
#include "core/durable.hpp"
#include "core/error.hpp"
#include "core/output_path.hpp"
#include "core/text_file.hpp"
#include "io/h5.hpp"
#include "kernels/cross_entropy.hpp"
#include "model/llama.hpp"
#include "train/weights.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <new>
#include <numeric>

namespace burst::cli {

namespace {

template <class T> int run_forward(const ForwardOptions& opt) {
  using Mem = DeviceMem;
  const ModelConfig mc = model_from_arg(opt.model);
  const std::filesystem::path out_dir = std::filesystem::path(opt.output).parent_path();
  BURST_CHECK_INPUT(out_dir.empty() || std::filesystem::is_directory(out_dir), "--output '", opt.output,
                    "': the directory '", out_dir.string(), "' does not exist");
  {  // the output must not replace an input or a checkpoint (forward writes through a rename)
    const auto same = [&](const std::string& in) { return same_file(opt.output, in); };
    BURST_CHECK_CONFIG(!same(opt.weights), "--output '", opt.output, "' is the --weights file: the logits would replace the weights");
    BURST_CHECK_CONFIG(!same(opt.tokens), "--output '", opt.output, "' is the --tokens file: the logits would replace the tokens");
    const std::string p = overwrite_problem("--output", opt.output);
    BURST_CHECK_CONFIG(p.empty(), p);
  }
  // Tokens first: a bad token file is found before the weights are read.
  const std::string tokens_problem = input_file_problem("tokens file", opt.tokens);
  BURST_CHECK_INPUT(tokens_problem.empty(), tokens_problem);
  io::H5File tf;
  try {
    tf = io::H5File::open(opt.tokens);
  } catch (const Error& e) {
    BURST_FAIL(ErrorKind::Input, "tokens file '", opt.tokens, "' cannot be read: ", e.message());
  }
  BURST_CHECK_INPUT(tf.exists("tokens"), "tokens file '", opt.tokens, "' has no dataset 'tokens'");
  BURST_CHECK_INPUT(tf.is_dataset("tokens"), "tokens file '", opt.tokens, "': 'tokens' is not a dataset (a group?)");
  const std::string tdt = tf.dtype("tokens");
  BURST_CHECK_INPUT(tdt.rfind("int", 0) == 0 || tdt.rfind("uint", 0) == 0, "tokens file '", opt.tokens,
                    "': dataset 'tokens' holds ", tdt, ", not integers (int8 to int64, uint8 to uint64)");
  // The shape before the values (a file declaring [2^40] tokens is named, not allocated).
  const io::Dims td = tf.dims("tokens");
  const double ntok = td.empty() ? 0 : std::accumulate(td.begin(), td.end(), 1.0, [](double a, std::uint64_t b) { return a * double(b); });
  BURST_CHECK_INPUT((td.size() == 1 || td.size() == 2) && ntok > 0, "tokens file '", opt.tokens,
                    "': dataset 'tokens' must be [s] or [b, s] and not empty, got ", io::dims_string(td));
  // The logits (and hidden states) those tokens need, before anything is read or allocated.
  const double out_bytes = double(ntok) * double(mc.vocab + (opt.hidden_states ? (mc.layers + 1) * mc.hidden : 0)) * sizeof(T);
  BURST_CHECK_INPUT(out_bytes <= double(std::numeric_limits<std::int64_t>::max()), "tokens file '", opt.tokens,
                    "': dataset 'tokens' declares ", io::dims_string(td), ": its logits would need ", out_bytes,
                    " bytes, beyond what a process can address");
  // And against the memory this process may have, before the allocation below: with overcommit a size the
  // machine cannot hold does not throw bad_alloc there, the process is killed filling it.
  const std::uint64_t mem_limit = io::process_memory_limit();
  BURST_CHECK_INPUT(mem_limit == 0 || out_bytes <= double(mem_limit), "tokens file '", opt.tokens, "': dataset 'tokens' is ",
                    io::dims_string(td), ": the logits of its ", std::int64_t(ntok), " tokens over the vocabulary of ", mc.vocab,
                    opt.hidden_states ? " (and the hidden states)" : "", " need ", std::int64_t(out_bytes), " bytes as ",
                    scalar_name<T>(), ", more than the ", mem_limit, " bytes of memory this process may use: give fewer tokens "
                    "(fewer or shorter rows, over several files)", opt.hidden_states ? ", leave out --hidden-states" : "",
                    sizeof(T) > 4 ? ", or use --dtype float" : "");
  const std::vector<std::int64_t> tok = tf.read<std::int64_t>("tokens");
  const long rows = td.size() == 2 ? long(td[0]) : 1, s = long(td.back());
  for (size_t i = 0; i < tok.size(); ++i)
    BURST_CHECK_INPUT(tok[i] >= 0 && tok[i] < mc.vocab, "tokens file '", opt.tokens, "': token ", tok[i], " at row ",
                      long(i) / s, ", position ", long(i) % s, " is outside the vocabulary [0, ", mc.vocab, ")");
  {  // the weights' model before the model is allocated (a 7B preset with a tiny file ran out of memory first)
    const WeightsReader w(opt.weights);
    w.require_weights_of(mc);
    // Same weights, other attention settings (no-RoPE layers, windows, log-length scale): allowed (the
    // logits follow --model), but said, since the logits then differ from the trained model's.
    const ModelConfig& wc = w.config();
    if (wc.nope_layers != mc.nope_layers || wc.window_layers != mc.window_layers || wc.sliding_window != mc.sliding_window ||
        wc.attn_log_scale != mc.attn_log_scale)
      std::fprintf(stderr,
                   "burst: warning: --model '%s' has the weights' shapes but other attention settings than the model in '%s' "
                   "(%s; the file's: %s): the logits follow --model (give the file's config.json, e.g. from export-hf, "
                   "to reproduce the trained model)\n",
                   opt.model.c_str(), opt.weights.c_str(), mc.describe().c_str(), wc.describe().c_str());
  }
  LlamaModel<T, Mem> model(mc, std::make_shared<LocalAttention<T, Mem>>(1.0 / std::sqrt(double(mc.head_dim))));
  load_weights(opt.weights, mc, model.params());

  std::vector<T> logits, hidden;
  const long L1 = mc.layers + 1, H = mc.hidden;
  try {
    logits.resize(std::size_t(rows * s * mc.vocab));
    if (opt.hidden_states) hidden.resize(std::size_t(rows * L1 * s * H));
  } catch (const std::bad_alloc&) {
    BURST_FAIL(ErrorKind::Input, "tokens file '", opt.tokens, "': dataset 'tokens' is ", io::dims_string(td), ": its logits",
               opt.hidden_states ? " and hidden states" : "", " need ", std::int64_t(out_bytes),
               " bytes, more than this process can allocate");
  }
  TempPath tmp(opt.output, ".tmp", TempPath::Links::Follow);  // a failure on the way leaves no file at --output and no temporary
  io::H5File out = io::H5File::create(tmp.path());
  mark_command_output(out, "forward");
  Kokkos::View<std::int32_t*, Layout, Mem> t("act/tokens", s), lab("act/labels", s);
  Kokkos::View<long*, Layout, Mem> pos("act/positions", s);
  auto ht = Kokkos::create_mirror_view(t);
  auto hp = Kokkos::create_mirror_view(pos);
  for (long i = 0; i < s; ++i) hp(i) = i;
  Kokkos::deep_copy(pos, hp);
  Kokkos::deep_copy(lab, kernels::kIgnoreIndex);
  Kokkos::View<T**, Layout, Mem> lg("act/logits", s, mc.vocab);
  for (long r = 0; r < rows; ++r) {
    for (long i = 0; i < s; ++i) ht(i) = std::int32_t(tok[std::size_t(r * s + i)]);
    Kokkos::deep_copy(t, ht);
    TokenBatch<Mem> b;
    b.tokens = t, b.labels = lab, b.positions = pos;
    std::vector<Kokkos::View<T**, Layout, Mem>> hs;
    model.forward_logits(b, lg, hs);
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), lg);
    std::copy(h.data(), h.data() + s * mc.vocab, logits.data() + r * s * mc.vocab);
    if (opt.hidden_states)
      for (long l = 0; l < L1; ++l) {
        auto hh = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), hs[std::size_t(l)]);
        std::copy(hh.data(), hh.data() + s * H, hidden.data() + (r * L1 + l) * s * H);
      }
  }
  const bool batched = td.size() == 2;
  auto dims = [&](std::initializer_list<std::uint64_t> d) {
    io::Dims x(d);
    if (batched) x.insert(x.begin(), std::uint64_t(rows));
    return x;
  };
  out.write("logits", logits, dims({std::uint64_t(s), std::uint64_t(mc.vocab)}));
  if (opt.hidden_states) {
    out.write("hidden_states", hidden, dims({std::uint64_t(L1), std::uint64_t(s), std::uint64_t(H)}));
    out.set_attr("hidden_states", "order", std::string("embeddings, then the output of each layer; the last after the final norm (Hugging Face output_hidden_states)"));
  }
  out.set_attr("/", "model_config", model_to_hf_json(mc));
  out.set_attr("/", "weights", opt.weights);
  out.set_attr("/", "tokens", opt.tokens);
  out.set_attr("/", "dtype", std::string(scalar_name<T>()));
  out.close();    // incomplete (disk full): an error, and no file at --output
  tmp.publish();  // synced before the rename: a crash leaves the earlier file at --output or the new one, whole
  std::printf("forward: %ld row(s) x %ld tokens through %s (%s) -> %s: logits%s\n", rows, s, mc.describe().c_str(),
              scalar_name<T>(), opt.output.c_str(), opt.hidden_states ? ", hidden_states" : "");
  return 0;
}
}  // namespace

int cmd_forward(Runtime& rt, const ForwardOptions& opt) {
  BURST_CHECK_CONFIG(rt.size() == 1, "burst forward runs on one process, not ", rt.size(), " ranks");
  BURST_CHECK_CONFIG(opt.dtype == "float" || opt.dtype == "double", "--dtype '", opt.dtype, "' must be float or double");
  return opt.dtype == "double" ? run_forward<double>(opt) : run_forward<float>(opt);
}

}  // namespace burst::cli
