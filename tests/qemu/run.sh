#!/usr/bin/env bash
# Boot the bench built by build.sh under QEMU (TCG) with two emulated e1000e NICs joined by a QEMU hub (eth0 and
# eth1 in the guest see each other's frames), print the serial console, and stop after TIMEOUT seconds.
#
#   tests/qemu/run.sh OUT_DIR [TIMEOUT_S]
#
# Exit status 77: QEMU is not installed (the caller reports a skip); 124: timed out.
set -euo pipefail
out=${1:?usage: run.sh OUT_DIR [TIMEOUT_S]}
limit=${2:-120}
qemu=$(command -v qemu-system-x86_64 || true)
[ -n "$qemu" ] || { echo "SKIP: qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)" >&2; exit 77; }
exec timeout --kill-after=5 "$limit" "$qemu" -machine q35,accel=tcg -cpu max -m 512 -smp 1 -nographic -no-reboot \
  -kernel "$out/vmlinuz" -initrd "$out/initrd.cpio.gz" \
  -append "console=ttyS0 panic=-1 quiet loglevel=3 rdinit=/init" \
  -netdev hubport,id=p0,hubid=0 -device e1000e,netdev=p0,mac=02:6b:70:00:00:01 \
  -netdev hubport,id=p1,hubid=0 -device e1000e,netdev=p1,mac=02:6b:70:00:00:02
