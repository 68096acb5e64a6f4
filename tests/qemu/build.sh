#!/usr/bin/env bash
# Build the keepon QEMU bench: Debian's stock kernel (pinned) and a busybox initramfs holding the kernel modules
# the tests need, `tc`, and the test binaries given on the command line.
#
#   tests/qemu/build.sh OUT_DIR GUEST_SCRIPT [FILE...]
#
# OUT_DIR receives vmlinuz and initrd.cpio.gz; GUEST_SCRIPT becomes /bench.sh in the guest (run by /init after the
# modules are loaded); each executable FILE is copied to /bin with the shared libraries `ldd` names (so a
# dynamically linked host binary such as `tc` or `keepon` runs unchanged), any other FILE to / (configurations). Downloads are cached in $KEEPON_QEMU_CACHE (default
# target/qemu/cache); nothing is installed on the host and nothing touches /boot.
#
# Exit status 77: a host tool or package is unavailable (the caller reports a skip).
set -euo pipefail

# The kernel is pinned: the expected ETF behaviour was recorded on this version.
KERNEL_PKG=linux-image-6.1.0-56-amd64
KERNEL_VER=6.1.192-2
KREL=6.1.0-56-amd64
MODULES=(sch_etf e1000e af_packet veth sch_taprio sch_mqprio)

out=${1:?usage: build.sh OUT_DIR GUEST_SCRIPT [FILE...]}
script=${2:?usage: build.sh OUT_DIR GUEST_SCRIPT [FILE...]}
shift 2
cache=${KEEPON_QEMU_CACHE:-$(cd "$(dirname "$0")/../.." && pwd)/target/qemu/cache}
mkdir -p "$out" "$cache"

skip() { echo "SKIP: $*" >&2; exit 77; }
for t in busybox dpkg-deb depmod cpio gzip ldd; do
  command -v "$t" >/dev/null 2>&1 || skip "$t is not installed (apt-get install busybox-static dpkg kmod cpio)"
done
busybox --list 2>/dev/null | grep -qx modprobe || skip "busybox has no modprobe applet (install busybox-static)"
file_of_busybox=$(command -v busybox)
if ldd "$file_of_busybox" >/dev/null 2>&1; then skip "busybox is dynamically linked; install busybox-static"; fi

# 1. The kernel package, downloaded once and unpacked (dpkg-deb -x: no installation).
kroot=$cache/kernel-$KERNEL_VER
if [ ! -f "$kroot/boot/vmlinuz-$KREL" ]; then
  deb=$cache/${KERNEL_PKG}_${KERNEL_VER}_amd64.deb
  if [ ! -f "$deb" ]; then
    (cd "$cache" && apt-get download -qq "$KERNEL_PKG=$KERNEL_VER") >/dev/null 2>&1 ||
      skip "apt-get download $KERNEL_PKG=$KERNEL_VER failed (no Debian bookworm repository or no network)"
  fi
  rm -rf "$kroot.tmp" && mkdir -p "$kroot.tmp"
  dpkg-deb -x "$deb" "$kroot.tmp"
  depmod -b "$kroot.tmp" "$KREL" # the package ships no modules.dep
  rm -rf "$kroot" && mv "$kroot.tmp" "$kroot"
fi
cp "$kroot/boot/vmlinuz-$KREL" "$out/vmlinuz"

# 2. The initramfs.
root=$out/root
rm -rf "$root"
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,tmp,run,etc,lib/modules}
cp "$file_of_busybox" "$root/bin/busybox"
for a in sh mount mkdir cat echo ip sleep poweroff modprobe ls grep head sed date uname dmesg seq wc tr; do
  ln -sf busybox "$root/bin/$a"
done
# The modules and everything they depend on, from modules.dep.
moddir=lib/modules/$KREL
mkdir -p "$root/$moddir"
cp "$kroot/$moddir"/modules.{dep,alias,builtin,order,symbols} "$root/$moddir/" 2>/dev/null || true
declare -A seen=()
add_module() {
  local name=$1 line path dep
  line=$(grep -E "(^|/)${name//_/[_-]}\.ko(\.[a-z]+)?:" "$kroot/$moddir/modules.dep" || true)
  if [ -z "$line" ]; then
    grep -qE "(^|/)${name//_/[_-]}\.ko" "$kroot/$moddir/modules.builtin" || echo "warning: module $name not found" >&2
    return
  fi
  path=${line%%:*}
  [ -n "${seen[$path]:-}" ] && return
  seen[$path]=1
  mkdir -p "$root/$moddir/$(dirname "$path")"
  cp "$kroot/$moddir/$path" "$root/$moddir/$path"
  for dep in ${line#*:}; do
    dep=$(basename "$dep"); dep=${dep%%.ko*}
    add_module "$dep"
  done
}
for m in "${MODULES[@]}"; do add_module "$m"; done
# Binaries with their shared libraries and loader.
add_binary() {
  local src=$1 dest=${2:-$root/bin/$(basename "$1")} lib
  cp "$src" "$dest"
  for lib in $(ldd "$src" 2>/dev/null | grep -oE '/[^ ]+' || true); do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
}
tc=$(command -v tc || echo /usr/sbin/tc)
[ -x "$tc" ] || skip "tc (iproute2) is not installed"
add_binary "$tc"
ln -sf ../../bin/tc "$root/usr/sbin/tc"
# iproute2's own `ip` as /usr/sbin/ip (busybox's applet cannot make a multi-queue veth, which taprio needs).
iproute=$(command -v ip || echo /usr/sbin/ip)
[ -x "$iproute" ] || skip "ip (iproute2) is not installed"
add_binary "$(readlink -f "$iproute")" "$root/usr/sbin/ip"
for b in "$@"; do
  [ -f "$b" ] || { echo "build.sh: no such file: $b" >&2; exit 1; }
  if [ -x "$b" ]; then add_binary "$b"; else cp "$b" "$root/$(basename "$b")"; fi
done
cp "$script" "$root/bench.sh"
cat > "$root/init" <<INIT
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run
for m in ${MODULES[*]}; do modprobe \$m 2>/dev/null; done
echo "BENCH-BOOT kernel=\$(uname -r)"
sh /bench.sh
echo "BENCH-EXIT status=\$?"
poweroff -f
INIT
chmod +x "$root/init" "$root/bench.sh"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$out/initrd.cpio.gz"
echo "built $out/vmlinuz and $out/initrd.cpio.gz ($(du -h "$out/initrd.cpio.gz" | cut -f1))"
