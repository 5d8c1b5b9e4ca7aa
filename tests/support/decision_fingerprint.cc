#include "tests/support/decision_fingerprint.h"

#include <sstream>

namespace tidal::testing {

std::string DecisionFingerprint(const Decisions& d) {
  std::ostringstream out;
  for (const PlaceDecision& p : d.places) {
    out << "P" << p.workload.value() << (p.borrowed ? "b" : "");
    for (const PodPlacement& pod : p.pods) out << ":" << pod.node.value() << "/" << pod.gpus;
    out << "\n";
  }
  for (const PreemptDecision& p : d.preempts) out << "X" << p.victim.value() << "<" << p.preemptor.value() << "\n";
  for (const ResizeDecision& r : d.resizes) out << "R" << r.workload.value() << ":" << r.to_pods << "\n";
  for (const WaitDecision& w : d.waits) {
    out << "W" << w.workload.value() << ":" << ReasonCodeName(w.reason) << ":" << w.detail << ":"
        << (w.estimated_start ? ToMillis(*w.estimated_start) : -1) << "\n";
  }
  for (const RejectDecision& r : d.rejects) out << "J" << r.workload.value() << ":" << r.detail << "\n";
  return out.str();
}

}  // namespace tidal::testing
