// The loan calendar GET /v1/loans answers (docs/api.md), both ways: the
// server encodes core's LoanCalendar, `tidal loans` decodes it. Times are
// milliseconds since the epoch, durations milliseconds; a node is named, a
// service has its id and name.
#ifndef TIDAL_PROTOCOL_LOAN_CALENDAR_H_
#define TIDAL_PROTOCOL_LOAN_CALENDAR_H_

#include <nlohmann/json.hpp>

#include "core/colocation/loan_calendar.h"
#include "core/common/status.h"

namespace tidal::protocol {

nlohmann::json LoanCalendarToJson(const LoanCalendar& calendar);
// Unknown fields are ignored (a newer server); node ids are not on the wire
// and come back invalid.
StatusOr<LoanCalendar> LoanCalendarFromJson(const nlohmann::json& j);

}  // namespace tidal::protocol

#endif  // TIDAL_PROTOCOL_LOAN_CALENDAR_H_
