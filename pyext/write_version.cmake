# Writes loom/version.py from version.py.in. Run at every build (pyext/CMakeLists.txt), not at
# configure time, so `git` names the commit actually built; configure_file leaves the file alone
# when its text is unchanged, so nothing downstream rebuilds.
execute_process(COMMAND git -C "${SOURCE_DIR}" rev-parse --short=12 HEAD
                OUTPUT_VARIABLE LOOM_GIT RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT rc EQUAL 0 OR LOOM_GIT STREQUAL "")
  set(LOOM_GIT "unknown")
else()
  execute_process(COMMAND git -C "${SOURCE_DIR}" status --porcelain --untracked-files=no
                  OUTPUT_VARIABLE changes ERROR_QUIET)
  if(NOT changes STREQUAL "")
    string(APPEND LOOM_GIT "+dirty")
  endif()
endif()
configure_file("${TEMPLATE}" "${OUTPUT}" @ONLY)
