// Files put in place by a rename (checkpoints, the published io.checkpoint,
// weights files) survive a power loss or a kernel crash only when their data
// reaches the disk before the rename does, and the rename before anything
// that relies on it (pruning the older checkpoints). Without the fsyncs a
// file system may commit the rename first: after a crash the new name holds
// an empty or partial file while the old checkpoint was already removed.
//
//   write "<name>.tmp", close it    (HDF5: H5File::close, errors reported)
//   rename_durably(tmp, name)       fsync tmp, rename, fsync the directory
//   ... only then prune older files
//
// Each failure is Error(IO) naming the file or directory and the system's
// message. A directory on a file system that cannot sync directories
// (EINVAL: some network and FUSE file systems) is taken as synced: there is
// nothing more a process can do there.
#pragma once

#include <string>

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

}  // namespace burst
