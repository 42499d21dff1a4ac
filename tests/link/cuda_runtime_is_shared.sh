#!/bin/sh
# cuda_runtime_is_shared.sh LIBRARY [LINK_COMMAND_FILE]: passes when LIBRARY takes the CUDA runtime
# from libcudart.so (DT_NEEDED), holds no copy of its own, and (where the build leaves its link
# command in a file) was not linked against cudart_static at all. Two runtimes in one process each
# keep their own contexts, streams and error state: a stream made by one is unknown to the other.
set -eu
lib=$1
readelf -d "$lib" | grep -q 'NEEDED.*libcudart\.so' ||
  { echo "$lib does not name libcudart.so among its needs"; exit 1; }
copies=$(nm -D --defined-only "$lib" | awk '$3 ~ /^cuda(Malloc|LaunchKernel|StreamCreate|GetLastError)$/ { print $3 }' | tr '\n' ' ')
if [ -n "$copies" ]; then
  echo "$lib defines CUDA runtime functions itself ($copies): it links cudart_static as well"
  exit 1
fi
if [ $# -ge 2 ] && grep -q 'cudart_static' "$2"; then
  echo "$lib is linked with cudart_static as well as the shared runtime ($2)"
  exit 1
fi
echo "$lib takes the CUDA runtime from libcudart.so only"
