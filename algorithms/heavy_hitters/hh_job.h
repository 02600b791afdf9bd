// The heavy-hitters job: zipf source -> count-min-hh (parallel, keyed) -> hh-merge sink, scored by precision,
// recall and average relative error against the exact counts of the generated stream.
#pragma once

#include <memory>

#include "afstream/runtime/job.h"

namespace afs::hh {

std::unique_ptr<Job> make_heavy_hitters_job();

}  // namespace afs::hh
