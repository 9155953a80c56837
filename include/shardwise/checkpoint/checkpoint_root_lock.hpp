// One writer per checkpoint root. Two jobs saving into the same --save DIR would interleave their
// steps and move `latest` back and forth; a job takes this lock before its first save and holds it
// until it ends, and a second job is refused with the owner's host and pid.
//
// The lock is flock(2) on DIR/.lock (released by the kernel when the holder exits, however it
// exits, so a crash never leaves a stale lock); the file's content - "host pid start-time" - is
// only there to name the owner in the message. A job that saved nothing removes the lock file
// (and DIR) it created when it releases the lock, so a run that failed before its first save
// leaves nothing behind; taking the lock checks that the file locked is still the one at DIR/.lock.
// Taking the lock also removes what a killed save left behind (hidden .step-N.staging.* and
// .step-N.pruned directories, .latest.tmp.* files): no other writer can be using them while we hold
// the lock.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace shardwise {

inline constexpr std::string_view kCheckpointLockFile = ".lock";

class CheckpointRootLock {
 public:
  // Creates `root` when missing, takes the lock without waiting and cleans up leftovers. Throws
  // IoError naming the root and the current owner when another process holds it.
  explicit CheckpointRootLock(const std::filesystem::path& root);
  ~CheckpointRootLock();
  CheckpointRootLock(const CheckpointRootLock&) = delete;
  CheckpointRootLock& operator=(const CheckpointRootLock&) = delete;

  const std::filesystem::path& root() const { return root_; }
  // Leftover entries removed when the lock was taken.
  int removed_leftovers() const { return removed_; }

 private:
  std::filesystem::path root_;
  int fd_ = -1;
  int removed_ = 0;
  bool created_root_ = false;  // this lock made the directory
  bool created_file_ = false;  // ... and the lock file
};

// Whether `name`, an entry of a checkpoint root, is one the saves write, replace or delete: the
// `latest` pointer, the lock file, step directories (--keep-last prunes them) and leftovers of
// interrupted saves. No other output of a run may be one of them or lie inside one.
bool is_checkpoint_root_entry(const std::string& name);

// The entries of `root` that a save would replace, truncate or prune and that this job cannot
// take as its own without --overwrite: complete checkpoints (step directories with a manifest),
// entries named like steps that are not (a directory without checkpoint.json, a file), a regular
// file `latest`, and a regular file `.lock` holding something other than the owner line a save
// writes (an old lock file of ours is empty or names a host and pid). A `latest` or `.lock` of
// another kind is left to the saves' own checks, which name what it is; leftovers of interrupted
// saves are left out too (taking the lock removes them). Sorted by name.
std::vector<std::string> existing_checkpoint_root_entries(const std::filesystem::path& root);

// Removes leftovers of interrupted saves in `root` (see above); returns how many. Only safe while
// holding the root's lock.
int remove_interrupted_save_leftovers(const std::filesystem::path& root);

}  // namespace shardwise
