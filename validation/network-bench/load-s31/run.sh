#!/bin/sh
# before/after in one run: the planner's python/ of main at 62adb6d (before) and of 4f0f0b4 (after), one process at a time
set -e
OUT=/tmp/h31/final
rm -rf $OUT; mkdir -p $OUT/src-before $OUT/src-after
git -C /work/main archive 62adb6d python | tar -x -C $OUT/src-before
git -C /work/main archive 4f0f0b4 python | tar -x -C $OUT/src-after
PY=/work/main/python/.venv/bin/python
for side in before after; do
  cd $OUT/src-$side/python
  PYTHONPATH=. $PY -c "import keepon_plan, sys; print(keepon_plan.__file__)" > $OUT/which-$side
  echo "start $(date -u +%T) $(cat /proc/loadavg)" > $OUT/load-$side
  /usr/bin/time -f "%e s wall, %U s user, %S s sys" env PYTHONPATH=. nice -n 10 $PY -m keepon_plan.cli network-sweep \
      --loads 75,85 --modes bytes/queueing --time-limit 4 --out $OUT/sweep-$side > $OUT/log-$side 2> $OUT/time-$side
  echo "end $(date -u +%T) $(cat /proc/loadavg)" >> $OUT/load-$side
done
