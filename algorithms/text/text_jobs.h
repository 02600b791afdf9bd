// The word-count and grep jobs (`afstream run --job wordcount | grep`, issue 4): their options (text.*,
// wordcount.*, grep.*), topologies, and evaluation against a direct scan of the corpus (exact results, and
// throughput in bytes, lines and words per second).
#pragma once

#include <memory>

#include "afstream/runtime/job.h"

namespace afs::text {

// text-source -> text-tokenize (parallel, by chunk) -> wc-count (parallel, by word hash) -> wc-merge.
std::unique_ptr<Job> make_wordcount_job();
// text-source -> grep-match (parallel, by chunk) -> grep-collect.
std::unique_ptr<Job> make_grep_job();

}  // namespace afs::text
