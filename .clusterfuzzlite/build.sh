#!/bin/bash -eu
# ClusterFuzzLite runs this as $SRC/build.sh in the image of .clusterfuzzlite/Dockerfile,
# with OSS-Fuzz's variables set; fuzz/build.sh does the work (and says how to run it here).
"$SRC/rpa/fuzz/build.sh"
