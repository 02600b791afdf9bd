// The distinct-counting job: zipf source -> distinct-hll (parallel, keyed) -> hll-merge sink, scored by the relative
// error of the estimate against the exact number of distinct keys of the generated stream.
#pragma once

#include <memory>

#include "afstream/runtime/job.h"

namespace afs::distinct {

std::unique_ptr<Job> make_distinct_job();

}  // namespace afs::distinct
