# The guest side of crates/keepon/tests/qemu_etf.rs, run by the bench's /init (busybox sh). eth0 and eth1 are
# two e1000e NICs on one QEMU hub: what eth0 sends, eth1 receives. Output between BEGIN-x and END-x markers.
ip link set lo up; ip link set eth0 up; ip link set eth1 up
# e1000e needs a moment for its link to come up.
for i in $(seq 1 50); do [ "$(cat /sys/class/net/eth0/operstate)" = up ] && break; sleep 0.2; done
echo "link eth0=$(cat /sys/class/net/eth0/operstate) eth1=$(cat /sys/class/net/eth1/operstate)"

# (0) Without a qdisc keepon refuses.
echo BEGIN-NOQDISC
keepon run --config /etf.toml --backend etf --iface eth0 --records /tmp/none.csv 2>&1
echo "END-NOQDISC status=$?"

# (a) The ETF program on the kernel's ETF (software mode, delta 5 ms), as the preload test runs it under keepon.
/usr/sbin/tc qdisc replace dev eth0 root etf clockid CLOCK_TAI delta 5000000
/usr/sbin/tc qdisc show dev eth0
keepon listen --iface eth1 --records /tmp/sender-rx.csv --duration 6s > /tmp/sender-listen.txt 2>&1 &
L=$!
sleep 1
base=$(( ($(date +%s) + 2) * 1000000000 ))
echo BEGIN-SENDER
etf-sender eth0 $base 20000000 10 3 0 500000 -- late -- soon 300000
echo "END-SENDER status=$?"
wait $L
echo BEGIN-SENDER-RX; cat /tmp/sender-rx.csv; cat /tmp/sender-listen.txt; echo END-SENDER-RX

# (a') The exact arguments crates/keepon/tests/txtime_preload.rs gives it under keepon (3.2 ms cycle, flows at 0 and
# 500 µs, a passed txtime, one for now + 300 µs), for the case-by-case table. Under TCG the guest is slow, so
# frames 0.5 ms apart may miss their time.
keepon listen --iface eth1 --records /tmp/exact-rx.csv --duration 4s > /tmp/exact-listen.txt 2>&1 &
L=$!
sleep 1
base=$(( ($(date +%s) + 2) * 1000000000 ))
echo BEGIN-EXACT
etf-sender eth0 $base 3200000 10 3 0 500000 -- late -- soon 300000
echo "END-EXACT status=$?"
wait $L
echo BEGIN-EXACT-RX; cat /tmp/exact-rx.csv; echo END-EXACT-RX

# (a'') The same program over UDP — a socket bound to eth0 (SO_BINDTODEVICE) sending to a multicast group — on
# the same ETF: a UDP socket's error queue (SOL_IP/IP_RECVERR, what payload), to set beside the preload's.
ip addr add 10.77.0.1/24 dev eth0
keepon listen --iface eth1 --records /tmp/udp-rx.csv --duration 6s > /tmp/udp-listen.txt 2>&1 &
L=$!
sleep 1
base=$(( ($(date +%s) + 2) * 1000000000 ))
echo BEGIN-UDP
etf-sender --udp 239.1.2.3:5000 eth0 $base 20000000 10 3 0 500000 -- late -- soon 300000
echo "END-UDP status=$?"
wait $L
echo BEGIN-UDP-RX; cat /tmp/udp-rx.csv; cat /tmp/udp-listen.txt; echo END-UDP-RX

# (b) keepon's flows through that ETF, the qdisc installed by keepon itself.
/usr/sbin/tc qdisc del dev eth0 root
keepon listen --iface eth1 --config /etf.toml --records /tmp/rx.csv --duration 12s > /tmp/listen.txt 2>&1 &
L=$!
sleep 1
echo BEGIN-KEEPON
keepon run --config /etf.toml --backend etf --iface eth0 --install-qdisc --etf-delta 5000000 --records /tmp/tx.csv 2>&1
echo "END-KEEPON status=$?"
/usr/sbin/tc qdisc show dev eth0
wait $L
echo BEGIN-TX; cat /tmp/tx.csv; echo END-TX
echo BEGIN-RX; cat /tmp/rx.csv; cat /tmp/listen.txt; echo END-RX

# (b') The same flows on keepon's byte clock (link.timing = "bytes"): each real frame's SCM_TXTIME is the time
# of the byte it starts on, within half a byte of its txtime; no padding to the slot size.
awk '{ print } /^\[link\]$/ { print "timing = \"bytes\"" }' /etf.toml > /tmp/etf-bytes.toml
/usr/sbin/tc qdisc del dev eth0 root
keepon listen --iface eth1 --config /tmp/etf-bytes.toml --records /tmp/rxb.csv --duration 12s > /tmp/listenb.txt 2>&1 &
L=$!
sleep 1
echo BEGIN-KEEPON-BYTES
keepon run --config /tmp/etf-bytes.toml --backend etf --iface eth0 --install-qdisc --etf-delta 5000000 --records /tmp/txb.csv 2>&1
echo "END-KEEPON-BYTES status=$?"
wait $L
echo BEGIN-TXB; cat /tmp/txb.csv; echo END-TXB
echo BEGIN-RXB; cat /tmp/rxb.csv; cat /tmp/listenb.txt; echo END-RXB

# (c) Gate control lists in the taprio-style form keepon-plan (and the case study) write, loaded into the kernel's
# own taprio on a 4-queue veth (taprio needs a multi-queue device; e1000e has one queue). load_gcl FILE DEV takes
# the first block of sched-entry lines (a `# egress` comment starts the next one), one traffic class per gate bit.
load_gcl() {
  f=$1; dev=$2; entries=""; n=0; top=0; cycle=""
  while read -r a b c d; do
    case "$a" in
      "#") if [ "$b" = egress ] && [ $n -gt 0 ]; then break; fi ;;
      cycle-time) cycle="cycle-time $b" ;;
      sched-entry) m=$((0x$c)); entries="$entries sched-entry S $c $d"; n=$((n + 1)); [ $m -gt $top ] && top=$m ;;
    esac
  done < "$f"
  tcs=1; while [ $((1 << tcs)) -le $top ]; do tcs=$((tcs + 1)); done
  map=""; for p in $(seq 0 15); do t=$p; [ $t -ge $tcs ] && t=$((tcs - 1)); map="$map $t"; done
  queues=""; for q in $(seq 0 $((tcs - 1))); do queues="$queues 1@$q"; done
  /usr/sbin/tc qdisc replace dev "$dev" parent root handle 100 taprio num_tc $tcs map $map queues $queues \
    base-time 0 $entries $cycle clockid CLOCK_TAI 2>&1
  echo "GCL file=$f entries=$n tcs=$tcs status=$?"
  /usr/sbin/tc qdisc show dev "$dev"
  /usr/sbin/tc qdisc del dev "$dev" root 2>/dev/null
}
echo BEGIN-TAPRIO
/usr/sbin/ip link add v0 numtxqueues 4 numrxqueues 4 type veth peer name v1
/usr/sbin/ip link set v0 up; /usr/sbin/ip link set v1 up
for f in /e2plan.gcl /gcl.txt; do [ -f "$f" ] && load_gcl "$f" v0; done
echo END-TAPRIO
