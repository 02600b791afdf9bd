// Names the calling thread (Linux: at most 15 characters, longer names are cut), so that top -H, perf and gdb show
// which worker or backup thread is which. A name that cannot be set is left alone: it is only a diagnostic.
#pragma once

#include <pthread.h>

#include <string>
#include <string_view>

namespace afs {

inline void name_this_thread(std::string_view name) {
  std::string n(name.substr(0, 15));
  (void)pthread_setname_np(pthread_self(), n.c_str());
}

}  // namespace afs
