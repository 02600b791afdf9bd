# Run at every build (the afs_git_revision target, afstream/cli/CMakeLists.txt): writes OUT, a header defining
# AFS_GIT_REVISION as the source tree's short revision, "+changes" when tracked files differ from it, and rewrites it
# only when that changed, so that main.cc is recompiled only then. (Read once at configure time, the revision went
# stale at the next commit: meta.json named a revision the binary was not built from.)
execute_process(COMMAND git -C "${SRC}" rev-parse --short HEAD OUTPUT_VARIABLE rev
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
execute_process(COMMAND git -C "${SRC}" status --porcelain --untracked-files=no OUTPUT_VARIABLE dirty
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(rev STREQUAL "")
  set(rev "unknown")
elseif(NOT dirty STREQUAL "")
  string(APPEND rev "+changes")
endif()
file(WRITE "${OUT}.tmp" "#define AFS_GIT_REVISION \"${rev}\"\n")
execute_process(COMMAND "${CMAKE_COMMAND}" -E copy_if_different "${OUT}.tmp" "${OUT}")
file(REMOVE "${OUT}.tmp")
