// The files behind io.checkpoint = "dir/ckpt.h5":
//   dir/ckpt.step00000012.h5   one per checkpoint, the last io.keep_last kept
//   dir/ckpt.h5                the newest of them (a hard link, or a copy
//                              where links are not possible), for tools
// Each is written to "<name>.tmp", synced to disk and renamed (the
// directory synced: core/durable.hpp), so a kill or a power loss at any
// moment leaves every published file whole. Every dataset carries an FNV-1a 64
// checksum of its bytes (attribute "fnv1a64"), checked when it is read, so
// a damaged file is refused naming the dataset and --resume falls back to
// the previous checkpoint.
#pragma once

#include "io/h5.hpp"

#include <string>
#include <utility>
#include <vector>

namespace burst {

std::string checkpoint_step_path(const std::string& path, long step);

// The step in `file`'s name when it is one of `path`'s step files
// ("dir/ckpt.step00000012.h5" of "dir/ckpt.h5": 12), else -1.
long step_in_checkpoint_name(const std::string& file, const std::string& path);

// The step files of `path` that exist, newest (highest step) first.
std::vector<std::pair<long, std::string>> list_step_checkpoints(const std::string& path);

// What --resume tries, in order: the step files newest first, then `path`
// itself when it is not one of them (a checkpoint from elsewhere).
std::vector<std::string> resume_candidates(const std::string& path);

// Points `path` at `step_file` atomically (link or copy to a temporary,
// synced to disk, then renamed; the directory synced).
void publish_checkpoint(const std::string& step_file, const std::string& path);

// Keeps the keep_last newest step files up to `step`; removes the older ones
// and any with a higher step (left by an earlier run this one replaces).
void prune_checkpoints(const std::string& path, long keep_last, long step);

// What is wrong with a run's two outputs ("" when nothing), checked on the
// rank that writes them before any work:
// - io.run_log must not be one of the checkpoint's files (`checkpoint`, its
//   step files, or their ".tmp" names): one would overwrite the other;
// - a new run (resume = false) does not replace an earlier run's files
//   unless `overwrite` (io.overwrite): an existing run log, checkpoint or
//   step file is refused, naming it, with the ways on (--resume, another
//   path, io.overwrite = true). Without this, a forgotten --resume wiped a
//   long run's log and its newer checkpoints.
std::string run_outputs_problem(const std::string& checkpoint, const std::string& run_log, bool resume, bool overwrite);

// What is wrong when a run's output would replace one of its inputs ("" when
// nothing): io.run_log the same file as an input (by identity when both
// exist, core/output_path.hpp), or an input one of io.checkpoint's files.
// io.overwrite allows replacing an earlier run's outputs, never inputs.
// `inputs`: (config key, path) pairs; empty paths are skipped.
std::string outputs_replace_inputs_problem(const std::string& checkpoint, const std::string& run_log,
                                           const std::vector<std::pair<std::string, std::string>>& inputs);

// Removes `path` and its step files (and their ".tmp" leftovers): a new run
// with io.overwrite = true starts from none of the old run's files, so that a
// kill before its first checkpoint cannot leave --resume the old run's.
void remove_checkpoint_files(const std::string& path);

// io.verify_checkpoint: how a written checkpoint is checked before it is
// renamed into place.
//   structure (default): reopened (HDF5 refuses a file shorter than the space
//     it allocated: a truncated file fails here); every dataset present with
//     its shape and type, its storage allocated (exactly its bytes, within
//     the file: for these contiguous datasets allocated at their first write,
//     so this confirms the writes reached HDF5, not the bytes on the disk),
//     its checksum attribute present. Metadata only: the cost does not grow
//     with the model (a 7B fp32 checkpoint is ~84 GB; hashing it back at
//     ~0.8 GB/s took minutes while the other ranks waited).
//   checksum: the structure, then every dataset read back whole against its
//     checksum (the data as the disk returns it; slow for large models).
//   off: nothing beyond HDF5's own close (which reports a failed write).
enum class CheckpointVerify { Off, Structure, Checksum };
// "off", "structure" or "checksum" (Error(Config) otherwise).
CheckpointVerify parse_checkpoint_verify(const std::string& s);

// A dataset a checkpoint must hold.
struct DatasetSpec {
  std::string name;   // "params/model.norm.weight"
  io::Dims dims;
  std::string dtype;  // "float32" or "float64" (H5File::dtype)
};

// Checks `expected` in the open file `f` as `how` says (Off: nothing).
// Error(IO) naming the file and the first dataset that fails.
void verify_datasets(const io::H5File& f, const std::vector<DatasetSpec>& expected, CheckpointVerify how);

// A dataset and its checksum attribute.
template <class T> void write_checked(io::H5File& f, const std::string& name, const T* data, const io::Dims& dims);

// Reads a float32/float64 dataset as T after checking the checksum over the
// bytes as stored. Throws Error(IO) naming the dataset when it is missing,
// has no checksum, or does not match it.
template <class T> std::vector<T> read_checked(const io::H5File& f, const std::string& name);

}  // namespace burst
