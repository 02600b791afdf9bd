// The online-learning job (`afstream run --job learn`, issue 5): examples source -> sgd-learner copies (data-parallel,
// forward) -> model-merge sink; scored by the progressive loss and accuracy, the held-out prediction rate of the
// averaged model, and its L1 distance to the true model when the data is generated.
#pragma once

#include <memory>

#include "afstream/runtime/job.h"

namespace afs::ml {

std::unique_ptr<Job> make_learn_job();

}  // namespace afs::ml
