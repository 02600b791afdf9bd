#include "afstream/core/out_file.h"

#include <cerrno>
#include <cstring>

#include "afstream/core/errors.h"

namespace afs {

void close_checked(std::ofstream& f, const std::string& path) {
  auto fail = [&](int e) {
    throw InputError("cannot write '" + path + "': " + (e != 0 ? std::strerror(e) : "a write failed"));
  };
  if (!f.is_open()) fail(errno);  // the open's errno, if nothing has run since (the callers open just before)
  const bool failed_before = f.fail();
  errno = 0;
  f.close();  // flushes: a full disk fails here
  if (failed_before || f.fail()) fail(errno);
}

}  // namespace afs
