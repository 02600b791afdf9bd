// Files a run writes (its results, summary.csv, metrics.jsonl, ...): a write that fails must be an error, not an
// empty file and exit status 0. An std::ofstream keeps what it writes in its buffer, so a full disk shows only when
// the buffer is flushed: close_checked flushes and closes, and names the file and the reason.
#pragma once

#include <fstream>
#include <string>

namespace afs {

// Flushes and closes f, opened on path: InputError "cannot write 'PATH': REASON" if opening it or any write failed.
void close_checked(std::ofstream& f, const std::string& path);

}  // namespace afs
