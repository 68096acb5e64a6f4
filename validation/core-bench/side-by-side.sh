#!/bin/sh
# The core benchmark of several commits, run alternately in one session on one core (issue 30's rule: a change to
# the pacing loop states its cost before and after, measured in one run).
#
#   git worktree add /tmp/wt-before 277e514^ && (cd /tmp/wt-before && cargo bench -p keepon --bench core --no-run)
#   git worktree add /tmp/wt-main 61a90c5 && (cd /tmp/wt-main && cargo bench -p keepon --bench core --no-run)
#   cargo bench -p keepon --bench core --no-run
#   validation/core-bench/side-by-side.sh ROUNDS CPU BINARY...   # each BINARY: the path cargo printed
#
# Prints each binary's pacing and insertion lines, ROUNDS times, the binaries alternating.
set -eu
rounds=$1
cpu=$2
shift 2
i=1
while [ "$i" -le "$rounds" ]; do
    for b in "$@"; do
        echo "== round $i: $b"
        taskset -c "$cpu" "$b" | grep -E "consumed per poll|recorded|ppm|per insertion|throughput"
    done
    i=$((i + 1))
done
