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
