// When a predictive return is sent: as late as is safe, at the moment within
// that slack that loses the least work (just after the borrowers'
// checkpoints land).
//
// Prepare plans the loans under the full look-ahead L (the returns the
// forecast calls for) and, when some node is returned, again under the short
// look-ahead S = cold start + grace + 2 x tick (what must come back now for
// replicas to be ready in time, one tick of lateness and one of margin). A
// node the full plan returns but the short plan still lends is an early
// return: inference needs it between S and L from now, so its return may wait
// up to W = L - S. For such a node, the work its return would stop (borrowed,
// not terminating, not already given notice; an elastic job that can shrink
// off the node loses nothing) would lose at time t
//     sum over borrowers of GPUs x (t - the borrower's last checkpoint at t),
// where a training job with a checkpoint interval I checkpoints at
// last_checkpoint + k x I and anything else never again; a borrower that
// saves on request within the grace (core/model/lost_work.h) loses its
// save, GPUs x save time, whenever it stops; and a borrower past its
// declared end (start + expected duration) is gone and loses nothing. The
// candidate times are now and, for each borrower whose next checkpoint or
// declared end e falls within the window, e + tick (the first pass after
// it). The return waits unless now loses the least (ties go to now: sooner
// is safer); every pass decides again, so the notice goes out in the pass
// just after the checkpoint (or end) that makes it cheapest, or when the
// short plan claims the node. A node whose every
// borrower saves on request costs the same at any moment, so its return
// waits for the short plan: as late as is safe, while its borrowers work.
#ifndef TIDAL_CORE_COLOCATION_RETURN_TIMING_H_
#define TIDAL_CORE_COLOCATION_RETURN_TIMING_H_

#include <map>
#include <utility>
#include <vector>

#include "core/common/ids.h"
#include "core/common/time.h"
#include "core/model/snapshot.h"

namespace tidal {

// Of the early returns `early` (ascending), those whose return should wait,
// given the slack `window` (L - S) and the pass interval `tick`; ascending.
// `noticed` holds the (workload, node) pairs already given notice; `grace` is
// what a return's victims get to leave.
std::vector<NodeId> ReturnsToDefer(const Snapshot& snapshot, const std::vector<NodeId>& early,
                                   Duration window, Duration tick, Duration grace,
                                   const std::map<std::pair<WorkloadId, NodeId>, Time>& noticed);

}  // namespace tidal

#endif  // TIDAL_CORE_COLOCATION_RETURN_TIMING_H_
