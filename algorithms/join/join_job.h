// The online-join job: join-streams source -> ripple-join (parallel, keyed by the join key) -> join-merge sink,
// scored against the exact join COUNT (and SUM) of the generated streams: relative error and whether the Theorem 3
// interval covers the exact value.
#pragma once

#include <memory>

#include "afstream/runtime/job.h"

namespace afs::join {

std::unique_ptr<Job> make_join_job();

}  // namespace afs::join
