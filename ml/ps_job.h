// The parameter-server job (`afstream run --job ps`, issue 5 item 3): examples sources -> ps-worker copies
// (data-parallel, forward) -> ps-server shards (keyed by weight index; parameters fed back upstream) -> ps-merge;
// consistency BSP, SSP or ASP. Scored as the learn job (learn.csv) plus the consistency and the staleness observed.
#pragma once

#include <memory>

#include "afstream/runtime/job.h"

namespace afs::ml {

std::unique_ptr<Job> make_ps_job();

}  // namespace afs::ml
