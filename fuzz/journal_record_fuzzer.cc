// The store's journal lines (read back at recovery and by `tidal sim
// replay`): a line that parses must write back to a line that parses.
#include "fuzz/fuzz_input.h"
#include "protocol/journal_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto record = tidal::protocol::JournalRecordFromText(tidal::fuzz::AsText(data, size));
  if (!record.ok()) return 0;
  const std::string again = tidal::protocol::JournalRecordToText(*record);
  if (!tidal::protocol::JournalRecordFromText(again).ok()) __builtin_trap();
  return 0;
}
