// Files put in place by a rename (checkpoints, the published io.checkpoint,
// weights files, forward's logits, safetensors files, an HF export) survive
// a power loss or a kernel crash only when their data reaches the disk
// before the rename does, and the rename before anything that relies on it
// (pruning the older checkpoints). Without the fsyncs a file system may
// commit the rename first: after a crash the new name holds an empty or
// partial file while the old checkpoint was already removed.
//
//   write "<name>.tmp", close it    (HDF5: H5File::close, errors reported)
//   rename_durably(tmp, name)       fsync tmp, rename, fsync the directory
//   ... only then prune older files
//
// TempPath names the temporary, renames it (publish) and removes it on every
// way out that did not rename it (an exception, an early return), so a
// failed write leaves the earlier file, or none, and no "<name>.tmp" behind.
//
// Each failure is Error(IO) naming the file or directory and the system's
// message. A directory on a file system that cannot sync directories
// (EINVAL: some network and FUSE file systems) is taken as synced: there is
// nothing more a process can do there. A directory sync that fails after the
// rename says that the new file is in place under its final name but may not
// survive a crash: the caller must not act on it as durable (prune).
#pragma once

#include <string>
#include <vector>

namespace burst {

// Opens `path` read-only and fsyncs it: its data and size are on the disk
// when this returns.
void fsync_file(const std::string& path);

// fsyncs the directory `dir` ("" = the current directory): the names created,
// renamed or removed in it are on the disk when this returns.
void fsync_dir(const std::string& dir);

// fsyncs the directory that holds `path`.
void fsync_parent_dir(const std::string& path);

// fsync_file(from), rename(from, to) (atomic: `to` names the old file or the
// new one, never neither), fsync_parent_dir(to). `from` and `to` are on the
// same file system (a temporary next to its target).
void rename_durably(const std::string& from, const std::string& to);

// A temporary beside an output, removed (never throwing) when it goes out of
// scope unpublished:
//   TempPath tmp(file);                    // "<file>.tmp"
//   write tmp.path(), close it (errors reported), check it
//   tmp.publish();                         // rename_durably(tmp.path(), file)
// Declare it before the object that writes the file, so that the file is
// closed before it is removed.
class TempPath {
 public:
  // The file "<final_path><suffix>"; a leftover of an earlier, killed write
  // is removed (a hard link could not be made over it). A final path that is
  // a symbolic link is replaced by the file (the link goes), unless
  // Links::Follow: then the file the link leads to is replaced and the link
  // stays (a command's --output pointing elsewhere). Checkpoints never follow:
  // a "latest" link to a step file would turn that step file into the new one.
  enum class Links { Replace, Follow };
  explicit TempPath(std::string final_path, std::string suffix = ".tmp", Links links = Links::Replace);
  // A staging directory "<dir>/<name>", created empty (a leftover removed):
  // several files written there whole before any of them moves into `dir`.
  // Removed with its contents unless published.
  static TempPath staging_dir(const std::string& dir, const std::string& name);
  TempPath(const TempPath&) = delete;
  TempPath& operator=(const TempPath&) = delete;
  ~TempPath();

  const std::string& path() const { return path_; }
  const std::string& final_path() const { return final_; }

  // A file: rename_durably(path(), final_path()). A staging directory: every
  // file in it synced, then each renamed into final_path() (by name), the
  // staging directory removed and final_path() synced. Error(IO) as
  // rename_durably. A rename failing part way (a file system gone read-only
  // or full) leaves the files moved before it in place and keeps the rest in
  // the staging directory (not removed by the destructor): the message names
  // both and where they are.
  void publish();
  // A staging directory: Error(IO) before anything changes when a staged
  // file's destination is a directory (the one obstacle a rename cannot
  // replace). Call it before changing the destination for the new files
  // (removing an earlier export's), so such an obstacle costs nothing.
  void check_publishable() const;
  // Whether publish() got the output under its final name: true also when
  // the directory sync after the rename failed (the new file is there, maybe
  // not on the disk), so a caller can tell that failure from a failed write.
  bool in_place() const { return in_place_; }

 private:
  TempPath(std::string final_path, std::string path, bool directory);
  std::vector<std::string> staged_names() const;  // sorted
  std::string final_, path_;
  bool directory_ = false, armed_ = true, in_place_ = false;
};

}  // namespace burst
