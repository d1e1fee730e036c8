#!/bin/sh
# A LOOM_CXX for valgrind runs: the host compiler with -march=native replaced by x86-64-v3
# (valgrind cannot run AVX-512; glibc's AVX2 vector exp has the slow path the AVX-512 one has).
for a in "$@"; do shift; [ "$a" = "-march=native" ] && a="-march=x86-64-v3"; set -- "$@" "$a"; done
exec g++ "$@"
