// One line per decision, in the order the pass made them, with every field
// a test compares: two passes decided the same when their fingerprints are
// equal.
#ifndef TIDAL_TESTS_SUPPORT_DECISION_FINGERPRINT_H_
#define TIDAL_TESTS_SUPPORT_DECISION_FINGERPRINT_H_

#include <string>

#include "core/model/decision.h"

namespace tidal::testing {

// Places "P<id>[b]:<node>/<mask>...", preempts "X<victim><<preemptor>",
// resizes "R<id>:<pods>", waits "W<id>:<reason>:<detail>:<start ms or -1>",
// rejects "J<id>:<detail>".
std::string DecisionFingerprint(const Decisions& d);

}  // namespace tidal::testing

#endif  // TIDAL_TESTS_SUPPORT_DECISION_FINGERPRINT_H_
