// Names one version of a snapshot's contents, so that a caller can tell
// "nothing changed since I last looked" without comparing anything: the
// scheduler skips a pass over a snapshot it has already seen decide nothing
// (core/engine/scheduler.h).
//
// Only state::State stamps a snapshot (Bump, on every edit it applies), and
// only a stamped snapshot is tracked. A copy may go on to change apart from
// its original, edited by hand, so a copy starts a lineage of its own and is
// untracked: nothing that compares stamps can mistake an edited copy for the
// version it was copied from. A move keeps the stamp; the moved-from one
// starts afresh. Lineages are numbered by a process-wide counter (shared with
// FreeGpusLog): which number a lineage gets changes nothing but whether two
// stamps are equal.
#ifndef TIDAL_CORE_MODEL_CHANGE_STAMP_H_
#define TIDAL_CORE_MODEL_CHANGE_STAMP_H_

#include <cstdint>

namespace tidal {

// A number no other lineage in this process has had.
uint64_t NewLineage();

class ChangeStamp {
 public:
  ChangeStamp() : lineage_(NewLineage()) {}
  ChangeStamp(const ChangeStamp&) : lineage_(NewLineage()) {}
  ChangeStamp& operator=(const ChangeStamp& other) {
    if (this != &other) Reset();
    return *this;
  }
  ChangeStamp(ChangeStamp&& other) noexcept
      : lineage_(other.lineage_), changes_(other.changes_), tracked_(other.tracked_) {
    other.Reset();
  }
  ChangeStamp& operator=(ChangeStamp&& other) noexcept {
    if (this != &other) {
      lineage_ = other.lineage_;
      changes_ = other.changes_;
      tracked_ = other.tracked_;
      other.Reset();
    }
    return *this;
  }

  // The contents changed (or may have): a new version, and from now on a
  // tracked one.
  void Bump() {
    ++changes_;
    tracked_ = true;
  }
  // Forgets the history: a new lineage, untracked.
  void Reset() {
    lineage_ = NewLineage();
    changes_ = 0;
    tracked_ = false;
  }

  // Whether the stamp names its contents: true only after a Bump.
  bool tracked() const { return tracked_; }
  uint64_t lineage() const { return lineage_; }
  uint64_t changes() const { return changes_; }

 private:
  uint64_t lineage_;
  uint64_t changes_ = 0;
  bool tracked_ = false;
};

}  // namespace tidal

#endif  // TIDAL_CORE_MODEL_CHANGE_STAMP_H_
