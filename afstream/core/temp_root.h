// Where temporary files go: TMPDIR when it is set and not empty (as mkdtemp(1) and mktemp(1) read it), else /tmp.
// One reading for the process runtime's run directory and the text jobs' generated corpus.
#pragma once

#include <cstdlib>
#include <string>

namespace afs {

struct TempRoot {
  std::string path;       // without a trailing '/' (except "/" itself)
  bool from_env = false;  // TMPDIR gave it
};

inline TempRoot temp_root() {
  const char* env = std::getenv("TMPDIR");
  TempRoot r{env != nullptr && *env != '\0' ? env : "/tmp", env != nullptr && *env != '\0'};
  while (r.path.size() > 1 && r.path.back() == '/') r.path.pop_back();
  return r;
}

}  // namespace afs
