//! An unmodified `SO_TXTIME` program on keepon: `clients/txtime/etf_sender.c`, written as an ETF user writes
//! one (AF_PACKET, `SO_TXTIME` with `CLOCK_TAI` and `SOF_TXTIME_REPORT_ERRORS`, `SCM_TXTIME`, `SO_TIMESTAMPING`
//! TX timestamps, error queue read with `poll`/`recvmsg(MSG_ERRQUEUE)`), runs under
//! `LD_PRELOAD=libkeepon_txtime.so` against `keepon daemon`.
//!
//! The program sends two flows of 10 frames, one cycle apart: flow 0 in ring slot 0 (owned by tc-0, the class its
//! socket priority maps to), flow 1 in ring slot 5 (owned by no class); one frame whose txtime passed 1 ms ago;
//! one for now + 300 µs (inside the slots keepon has already posted to the NIC). Checked from the program's own
//! log: every frame ends in exactly one of a TX timestamp or an ETF error-queue message; the passed txtime is
//! refused at send (ENOBUFS) with `EINVAL`/`SO_EE_CODE_TXTIME_INVALID_PARAM`, as ETF does at enqueue; flow 1 gets
//! `INVALID_PARAM`; the posted-slot frame `ECANCELED`/`SO_EE_CODE_TXTIME_MISSED`; flow 0 gets TX timestamps equal
//! to the slot times keepon sent them in.
//!
//! - `preload_on_a_simulated_daemon`: the daemon on the simulated NIC held to the wall clock, the program in a
//!   namespace of its own on `lo` (its frames never reach `lo`: keepon takes them). The simulated wire is exact:
//!   without underruns every timestamp equals its txtime to the nanosecond (hardware slot, TAI) and the software
//!   slot is the same instant on `CLOCK_REALTIME`.
//! - `preload_through_a_bridge`: the daemon on AF_PACKET (host-paced veth) in the talker namespace of the
//!   talker ─ bridge ─ listener topology, `keepon listen` behind the bridge: the listener receives flow 0, in
//!   order, and nothing else; hardware timestamps (slot times) within half a slot of the txtime (function, not
//!   timing: veth has no line clock); software timestamps when the host released each frame to the kernel, after
//!   its slot time.
//!
//! - `preload_edge_cases`: `clients/txtime/preload_check.c` (self-checking) exercises `sendmmsg`, `sendto`, `write`
//!   and `send`, a clockid other than `CLOCK_TAI`, deadline mode, sockets without error reporting or timestamps,
//!   an AF_PACKET `SOCK_DGRAM` socket (keepon puts the Ethernet header before its data, as the kernel would),
//!   truncated error-queue reads, `poll` for `POLLERR`, and what must pass through to the kernel (another
//!   interface, UDP not routed through the keepon interface, a reused descriptor); the daemon must have counted
//!   exactly the frames meant for keepon.
//! - `preload_udp_through_a_bridge`: the same program with `--udp` (a UDP socket bound to kp0): keepon builds the
//!   frames (Ethernet, IPv4, UDP) and the kernel's own UDP sockets behind the bridge receive them intact.
//! - `preload_when_the_daemon_dies_mid_run`: the daemon is killed while frames wait for their slots; each frame
//!   still ends in one TX timestamp or one `MISSED`.
//!
//! Needs root (skips otherwise) and a C compiler (`make txtime-preload` builds the library and the program).
//! Bounded in time (≈ 5 s each); namespaces deleted and processes killed by guards.
#![cfg(target_os = "linux")]

#[allow(dead_code)] // not every helper is used here
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use keepon::api::Client;
use keepon::record;

use support::{bridged, can_chrt, ip, is_root, listening, wait_until, Proc};

const BIN: &str = env!("CARGO_BIN_EXE_keepon");
const SLOT: i64 = 100_000;
const CYCLE: i64 = 32 * SLOT;
const COUNT: usize = 10;
/// Ring slot 5: no class owns it.
const STRAY_OFFSET: i64 = 5 * SLOT;
const SOON: i64 = 300_000;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Build the preload library and the program with the Makefile, once per test process (the tests run in
/// parallel); `None` (skip) without a C compiler.
fn build() -> Option<(PathBuf, PathBuf)> {
    static BUILT: std::sync::OnceLock<Result<bool, String>> = std::sync::OnceLock::new();
    let built = BUILT.get_or_init(|| {
        if Command::new("cc").arg("--version").output().is_err() {
            return Ok(false);
        }
        let out =
            Command::new("make").arg("-C").arg(repo()).arg("txtime-preload").output().map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        Ok(true)
    });
    match built {
        Ok(true) => {}
        Ok(false) => {
            println!("skipping: no C compiler (cc)");
            return None;
        }
        Err(e) => panic!("make txtime-preload: {e}"),
    }
    let c = repo().join("target/c");
    Some((c.join("libkeepon_txtime.so"), c.join("etf-sender")))
}

fn c_program(name: &str) -> PathBuf {
    repo().join("target/c").join(name)
}

/// The daemon's configuration: slots, or (`bytes`) the byte clock with the same slot masks as time windows.
fn config(socket: &Path, bytes: bool) -> String {
    format!(
        r#"# keepon txtime_preload test
[link]
rate = "100Mbps"
timing = "{}"
[ring]
slot_bytes = 1230      # δ = 100 µs
slots = 32             # cycle 3.2 ms
batch = 24             # 2.4 ms posted ahead: a host stall shorter than that does not underrun
slot_masks = "0x01,0x20002,0"
[run]
poll_period = "50us"
[daemon]
socket = "{}"
"#,
        if bytes { "bytes" } else { "slots" },
        socket.display()
    )
}

/// Half a byte at 100 Mb/s (ns): the byte clock puts a frame on the byte nearest its txtime.
const HALF_BYTE: i64 = 40;
/// Flow 0's offset into ring slot 0 on the byte clock: not a slot start, where slots would send it 12 µs early.
const BYTES_OFFSET: i64 = 12_345;

/// Where the wire puts a flow-0 frame against its txtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wire {
    /// Exactly on it (slots, the simulated NIC, no underruns).
    Exact,
    /// Within half a slot (slots, a host-paced link or underruns); later after underruns.
    Slot,
    /// Within half a byte (the byte clock); later after underruns, never earlier.
    Byte,
}

/// What the program logged.
#[derive(Debug, Default)]
struct Log {
    /// key → (flow, txtime, accepted by send)
    sends: BTreeMap<u32, (i64, i64, bool)>,
    /// (errno, code, txtime)
    errors: Vec<(String, String, i64)>,
    /// key → (software ns, hardware ns)
    stamps: BTreeMap<u32, (i64, i64)>,
    /// key → when its send returned (CLOCK_TAI ns)
    done: BTreeMap<u32, i64>,
}

fn field<'a>(line: &'a str, name: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(name).and_then(|r| r.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {name}= in `{line}`"))
}

fn num(line: &str, name: &str) -> i64 {
    field(line, name).parse().unwrap_or_else(|_| panic!("{name} in `{line}`"))
}

fn parse_log(out: &str) -> Log {
    let mut log = Log::default();
    for line in out.lines() {
        if line.starts_with("send ") {
            let key = num(line, "key") as u32;
            let ok = line.ends_with(" ok");
            assert!(log.sends.insert(key, (num(line, "flow"), num(line, "txtime"), ok)).is_none(), "{line}");
            log.done.insert(key, num(line, "done"));
        } else if line.starts_with("errq txtime ") {
            // As ETF's: the software timestamp before the error is the txtime.
            assert_eq!(num(line, "ts0"), num(line, "txtime"), "the timestamp of a txtime error: {line}");
            log.errors.push((field(line, "errno").into(), field(line, "code").into(), num(line, "txtime")));
        } else if line.starts_with("errq tstamp ") {
            let key = num(line, "key") as u32;
            assert!(log.stamps.insert(key, (num(line, "sw"), num(line, "hw"))).is_none(), "two stamps: {line}");
        } else if line.starts_with("errq ") {
            panic!("unexpected error-queue message: {line}");
        }
    }
    log
}

fn number_before(text: &str, what: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let i = l.find(what)?;
        l[..i].split_whitespace().last()?.parse().ok()
    })
}

/// How the daemon's link is paced, for the software TX timestamps the program must see.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pacing {
    /// The NIC paces its wire (the simulated NIC): the software stamp is the slot time.
    Nic,
    /// The host paces the link (veth): the software stamp is when the host released the frame to the kernel,
    /// after the slot time.
    Host,
}

/// Check the program's log. `exact`: no underruns on a simulated wire (timestamps equal txtimes). `udp`: the
/// program's socket is a UDP one, whose send does not fail for a refused frame (UDP hides the qdisc's ENOBUFS
/// without IP_RECVERR, as the QEMU bench shows on ETF). Returns the txtimes of the frames keepon sent and, for
/// each, its software stamp's lag behind its hardware stamp (ns, both as TAI).
fn check(log: &Log, underruns: u64, wire: Wire, pacing: Pacing, udp: bool) -> (Vec<i64>, Vec<i64>) {
    assert_eq!(log.sends.len(), 2 * COUNT + 2, "{log:?}");
    let errors_for = |t: i64| log.errors.iter().filter(|e| e.2 == t).collect::<Vec<_>>();
    // No error-queue message that belongs to no frame.
    for e in &log.errors {
        assert!(log.sends.values().any(|s| s.1 == e.2), "error for an unknown txtime: {e:?}");
    }
    let mut sent = Vec::new();
    let mut lags = Vec::new();
    for (&key, &(flow, txtime, ok)) in &log.sends {
        let errs = errors_for(txtime);
        let stamp = log.stamps.get(&key);
        // Exactly one ending per frame.
        assert_eq!(errs.len() + usize::from(stamp.is_some()), 1, "frame {key} (flow {flow}): {errs:?} {stamp:?}");
        let missed = |e: &[&(String, String, i64)]| e.len() == 1 && e[0].0 == "ECANCELED" && e[0].1 == "MISSED";
        let invalid = |e: &[&(String, String, i64)]| e.len() == 1 && e[0].0 == "EINVAL" && e[0].1 == "INVALID_PARAM";
        match flow {
            99 => assert!(ok == udp && invalid(&errs), "passed txtime: refused at send, INVALID_PARAM: {errs:?}"),
            98 => {
                // Its txtime is 300 µs after the program read the clock: a host that stalled the program longer
                // than that before the send made it pass, and it is refused at send as ETF would.
                let passed = log.done[&key] >= txtime && ok == udp && invalid(&errs);
                if passed {
                    println!("the `soon` frame's txtime passed before its send returned (a host stall): refused");
                }
                assert!(
                    ok && missed(&errs) || passed || underruns > 0 && (stamp.is_some() || invalid(&errs)),
                    "txtime in a posted slot: MISSED, got {errs:?} {stamp:?} ({underruns} underruns)"
                )
            }
            1 => assert!(
                ok && invalid(&errs) || underruns > 0 && missed(&errs),
                "flow 1 (ring slot 5, not owned): INVALID_PARAM, got {errs:?} ({underruns} underruns)"
            ),
            0 => {
                assert!(ok, "flow 0 frame {key} refused at send");
                match stamp {
                    Some(&(sw, hw)) => {
                        let (early, on) = match wire {
                            Wire::Exact => (0, 0),
                            Wire::Slot => (SLOT / 2, SLOT / 2),
                            Wire::Byte => (HALF_BYTE, HALF_BYTE),
                        };
                        let late_ok = if underruns > 0 { i64::MAX } else { on };
                        assert!(
                            hw - txtime >= -early && hw - txtime <= late_ok,
                            "frame {key}: hardware stamp {hw} vs txtime {txtime} ({wire:?}, {underruns} underruns)"
                        );
                        // Both stamps as TAI: the software one is on CLOCK_REALTIME.
                        let lag = sw + support::tai_offset_ns() - hw;
                        match pacing {
                            Pacing::Nic => assert_eq!(lag, 0, "software timestamp: the slot time on CLOCK_REALTIME"),
                            // Released after its slot time (1 µs for conversions), within the daemon's wait for a
                            // release report (beyond it the slot time stands).
                            Pacing::Host => assert!(
                                (-1_000..keepon::api::RELEASE_WAIT.as_nanos() as i64).contains(&lag),
                                "frame {key}: software stamp {lag} ns after the hardware stamp"
                            ),
                        }
                        sent.push(txtime);
                        lags.push(lag);
                    }
                    None => assert!(underruns > 0 && missed(&errs), "flow 0 frame {key}: {errs:?}"),
                }
            }
            f => panic!("unknown flow {f}"),
        }
    }
    (sent, lags)
}

/// `[chrt -f 50] keepon daemon --config CFG ARGS…`, under `SCHED_FIFO` where the host allows it (fewer underruns
/// on a loaded machine), optionally inside a namespace.
fn daemon_cmd(ns: Option<&str>, cfg: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(if ns.is_some() {
        "ip"
    } else if can_chrt() {
        "chrt"
    } else {
        BIN
    });
    if let Some(ns) = ns {
        c.args(["netns", "exec", ns]);
        if can_chrt() {
            c.arg("chrt");
        }
    }
    if can_chrt() {
        c.args(["-f", "50"]);
    }
    if ns.is_some() || can_chrt() {
        c.arg(BIN);
    }
    c.args(["daemon", "--config"]).arg(cfg).args(args);
    c
}

fn sender_args(cmd: &mut Command, iface: &str, base: i64) {
    sender_args_at(cmd, iface, base, 0)
}

/// [`sender_args`] with flow 0 `offset` ns into its cycle.
fn sender_args_at(cmd: &mut Command, iface: &str, base: i64, offset: i64) {
    cmd.args([iface, &base.to_string(), &CYCLE.to_string(), &COUNT.to_string(), "3", &offset.to_string()])
        .arg(STRAY_OFFSET.to_string())
        .args(["--", "late", "--", "soon", &SOON.to_string()]);
}

fn preload_env(cmd: &mut Command, lib: &Path, socket: &Path, iface: &str) {
    cmd.env("LD_PRELOAD", lib)
        .env("KEEPON_SOCKET", socket)
        .env("KEEPON_IFACE", iface)
        .env("KEEPON_PRIO_CLASS", "3=tc-0")
        .env("KEEPON_TXTIME_LOG", "1");
}

/// The daemon on the simulated NIC (for `duration`, or until stopped) and a network namespace of its own for the
/// program (`lo` is its keepon interface): the work directory, the namespace and its guard, the daemon, and a
/// ring-slot-0 start [`LEAD_CYCLES`] ahead — the program's base time, as an ETF application is configured with
/// the network's schedule (its taprio base-time).
fn sim_daemon_and_namespace(
    prefix: &str,
    duration: &str,
    bytes: bool,
) -> (tempfile::TempDir, String, support::Namespaces, Proc, i64) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sock = d.join("keepon.sock");
    std::fs::write(d.join("D.toml"), config(&sock, bytes)).unwrap();
    let (ns, guard) = support::lone_namespace(prefix);
    let daemon = Proc::spawn(
        "daemon",
        d,
        &mut daemon_cmd(None, &d.join("D.toml"), &["--backend", "sim", "--duration", duration]),
    );
    assert!(wait_until(Duration::from_secs(5), || sock.exists()), "daemon socket\n{}", daemon.output());
    (dir, ns, guard, daemon, base_ahead(&sock))
}

/// Cycles between the moment a test reads the schedule and its program's base time. The program starts in a
/// namespace (`ip netns exec`, the preload's connection to the daemon) before its first send: a loaded host can take
/// a few hundred ms for that, and a txtime that has passed is refused at send, as ETF does. Read right before the
/// program starts.
const LEAD_CYCLES: i64 = 150; // 480 ms

/// A ring-slot-0 start [`LEAD_CYCLES`] ahead on the daemon at `sock`'s schedule.
fn base_ahead(sock: &Path) -> i64 {
    let info = Client::connect(sock).and_then(|mut c| c.info()).expect("daemon info");
    info.cycle_start + LEAD_CYCLES * CYCLE
}

#[test]
fn preload_on_a_simulated_daemon() {
    preload_on_the_simulator(false);
}

/// The ETF promise on the byte clock: flow 0 asks for 12.345 µs into ring slot 0's window, and every frame's
/// hardware timestamp (its wire time, exact on the simulated NIC) is within half a byte (40 ns at 100 Mb/s) of
/// its txtime — never earlier — where slots send it at the slot start, 12 µs early.
#[test]
fn preload_on_a_byte_clock_daemon() {
    preload_on_the_simulator(true);
}

fn preload_on_the_simulator(bytes: bool) {
    if !is_root() {
        println!("skipping: needs root (AF_PACKET socket in a network namespace)");
        return;
    }
    let Some((lib, sender)) = build() else { return };
    let (dir, ns, _guard, mut daemon, base) = sim_daemon_and_namespace(if bytes { "kpb" } else { "kpt" }, "4s", bytes);
    let (d, sock) = (dir.path(), dir.path().join("keepon.sock"));
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &ns]).arg(&sender);
    sender_args_at(&mut cmd, "lo", base, if bytes { BYTES_OFFSET } else { 0 });
    preload_env(&mut cmd, &lib, &sock, "lo");
    let mut prog = Proc::spawn("etf-sender", d, &mut cmd);
    let out = prog.success(Duration::from_secs(10));
    let daemon_out = daemon.success(Duration::from_secs(10));
    let underruns = number_before(&daemon_out, "underruns").expect("daemon summary");
    println!("{out}{daemon_out}\n{underruns} underruns");
    let log = parse_log(&out);
    let wire = match (bytes, underruns) {
        (true, _) => Wire::Byte,
        (false, 0) => Wire::Exact,
        (false, _) => Wire::Slot,
    };
    let (sent, _) = check(&log, underruns, wire, Pacing::Nic, false);
    assert!(underruns > 0 || sent.len() == COUNT, "{}", prog.output());
    if bytes {
        let offs: Vec<i64> = log.stamps.values().map(|&(_, hw)| (hw - base).rem_euclid(CYCLE)).collect();
        println!("flow 0 wire offsets into the cycle (ns): {offs:?}");
    }
}

/// `keepon listen` on kp1 (records in `lcsv`) and, once it receives, the daemon on kp0 (AF_PACKET, host-paced)
/// of a bridged topology, its socket up. Both run until [`stop_daemon_and_listener`].
fn listener_and_daemon(d: &Path, topo: &support::Bridged, lcsv: &Path) -> (Proc, Proc) {
    let listener = Proc::spawn(
        "listen",
        d,
        Command::new("ip")
            .args(["netns", "exec", &topo.listener, BIN, "listen", "--iface", "kp1", "--records"])
            .arg(lcsv)
            .args(["--duration", "60s"]),
    );
    assert!(listening(&listener), "listener socket: {}", listener.output());
    let daemon = Proc::spawn(
        "daemon",
        d,
        daemon_cmd(
            Some(&topo.talker),
            &d.join("D.toml"),
            &["--backend", "afpacket", "--iface", "kp0", "--pacing", "host", "--filler", "reserved-address"],
        )
        .args(["--duration", "60s"]),
    );
    let sock = d.join("keepon.sock");
    assert!(wait_until(Duration::from_secs(5), || sock.exists()), "daemon socket\n{}", daemon.output());
    (listener, daemon)
}

/// Stop the daemon (SIGTERM: it sends what it accepted, then reports) and then the listener (SIGINT: it reads
/// what has arrived, then writes its records), once the programs are done, however long they took on a loaded
/// host. Their standard outputs.
fn stop_daemon_and_listener(daemon: &mut Proc, listener: &mut Proc) -> (String, String) {
    // SAFETY: kill(2) on processes this test started (`ip netns exec` and `chrt` exec keepon in the same process).
    assert_eq!(unsafe { libc::kill(daemon.pid() as libc::pid_t, libc::SIGTERM) }, 0);
    let daemon_out = daemon.success(Duration::from_secs(10));
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(listener.pid() as libc::pid_t, libc::SIGINT) }, 0);
    (daemon_out, listener.success(Duration::from_secs(10)))
}

/// What a bridge test starts from: the library and the program (`None`, skipped, without root or a C compiler), a
/// work directory with the daemon's configuration, and the bridged topology named `prefix`.
fn bridge_setup(prefix: &str) -> Option<(PathBuf, PathBuf, tempfile::TempDir, support::Bridged)> {
    bridge_setup_on(prefix, false)
}

/// [`bridge_setup`], on the byte clock if `bytes`.
fn bridge_setup_on(prefix: &str, bytes: bool) -> Option<(PathBuf, PathBuf, tempfile::TempDir, support::Bridged)> {
    if !is_root() {
        println!("skipping: needs root (network namespaces)");
        return None;
    }
    let (lib, sender) = build()?;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("D.toml"), config(&dir.path().join("keepon.sock"), bytes)).unwrap();
    Some((lib, sender, dir, bridged(prefix)))
}

#[test]
fn preload_through_a_bridge() {
    through_a_bridge(false);
}

/// The byte clock on a host-paced veth: the wire times (hardware stamps, on the EPHC) are within half a byte of
/// each txtime, never earlier, while the link keeps up; the host hands each frame to the kernel at most 1 µs
/// (clock conversions) before that time — the host-paced form of ETF's promise (the kernel's own latency
/// follows, which a host-paced link cannot see).
#[test]
fn preload_through_a_bridge_on_the_byte_clock() {
    through_a_bridge(true);
}

fn through_a_bridge(bytes: bool) {
    let Some((lib, sender, dir, topo)) = bridge_setup_on(if bytes { "kw" } else { "kx" }, bytes) else { return };
    let (d, sock) = (dir.path(), dir.path().join("keepon.sock"));
    let lcsv = d.join("L.csv");
    let (mut listener, mut daemon) = listener_and_daemon(d, &topo, &lcsv);
    let info = Client::connect(&sock).and_then(|mut c| c.info()).expect("daemon info");
    let base = info.cycle_start + 50 * CYCLE;
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &topo.talker]).arg(&sender);
    sender_args_at(&mut cmd, "kp0", base, if bytes { BYTES_OFFSET } else { 0 });
    preload_env(&mut cmd, &lib, &sock, "kp0");
    let mut prog = Proc::spawn("etf-sender", d, &mut cmd);
    let out = prog.success(Duration::from_secs(10));
    let (daemon_out, listen_out) = stop_daemon_and_listener(&mut daemon, &mut listener);
    let underruns = number_before(&daemon_out, "underruns").expect("daemon summary");
    println!("{out}{daemon_out}\n{listen_out}");
    let log = parse_log(&out);
    let (mut sent, lags) = check(&log, underruns, if bytes { Wire::Byte } else { Wire::Slot }, Pacing::Host, false);
    // The software stamps are the host's release times, not the slot times (the host releases every frame after
    // its slot: microseconds on an idle host).
    println!("software stamp − hardware stamp (ns): {lags:?}");
    assert!(lags.iter().any(|&l| l > 0), "software stamps are release times: {lags:?}");
    // The listener heard exactly the frames keepon sent, in txtime order: flow 0 only.
    let heard = record::read(&lcsv).unwrap();
    let heard_times: Vec<i64> = heard.iter().map(|r| r.txtime_ns.expect("txtime in the test header")).collect();
    assert!(heard.iter().all(|r| r.flow == "flow-0"), "only flow 0 crosses: {heard:?}");
    sent.sort_unstable();
    assert_eq!(heard_times, sent, "the listener receives every frame keepon sent, in order, and no other");
}

#[test]
fn preload_edge_cases() {
    if !is_root() {
        println!("skipping: needs root (AF_PACKET sockets in a network namespace)");
        return;
    }
    let Some((lib, _)) = build() else { return };
    let (dir, ns, _guard, mut daemon, _) = sim_daemon_and_namespace("kpe", "4s", false);
    let (d, sock) = (dir.path(), dir.path().join("keepon.sock"));
    // A second interface for traffic keepon must leave alone (this kernel has no `dummy`).
    ip(&["-n", &ns, "link", "add", "d0", "type", "veth", "peer", "name", "d1"]);
    for dev in ["d0", "d1"] {
        ip(&["-n", &ns, "link", "set", "dev", dev, "addrgenmode", "none"]);
        ip(&["-n", &ns, "link", "set", "dev", dev, "up"]);
    }
    // The schedule read again now that the namespace is set up (that took time on a loaded host).
    let base = base_ahead(&sock);
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &ns]).arg(c_program("preload-check")).arg(base.to_string());
    preload_env(&mut cmd, &lib, &sock, "lo");
    let mut prog = Proc::spawn("preload-check", d, &mut cmd);
    let out = prog.success(Duration::from_secs(10));
    let daemon_out = daemon.success(Duration::from_secs(10));
    println!("{}\n{daemon_out}", prog.output());
    let underruns = number_before(&daemon_out, "underruns").expect("daemon summary");
    // 3 frames of A, 2 of D, 1 of H and 1 of I; everything else went to the kernel or was refused before reaching
    // keepon.
    assert_eq!(number_before(&daemon_out, "frames"), Some(7), "frames the daemon received");
    let err = prog.output();
    assert!(
        err.contains("UDP over IPv6 is not taken over by keepon") || err.contains("J: no IPv6 here"),
        "an IPv6 UDP socket with SO_TXTIME is named: {err}"
    );
    let stamps: Vec<(i64, i64)> = out
        .lines()
        .filter_map(|l| l.strip_prefix("tstamp "))
        .map(|l| {
            let (t, hw) = l.split_once(' ').expect("two numbers");
            (t.parse().unwrap(), hw.parse().unwrap())
        })
        .collect();
    assert_eq!(stamps.len(), 3, "{out}");
    for (txtime, hw) in stamps {
        if underruns == 0 {
            assert_eq!(hw, txtime, "hardware timestamp = slot time = txtime on the simulated wire");
        } else {
            assert!(hw - txtime >= -SLOT / 2, "{hw} vs {txtime} ({underruns} underruns)");
        }
    }
}

/// A receiving UDP socket on port `port` in network namespace `ns` (joined to `group` on `local`), read on its own
/// thread until `stop` is set and nothing more is queued: the kernel's IP stack checks each datagram's IPv4 and
/// UDP checksums and addresses before handing it over. Signals when it is ready; returns the payloads.
fn kernel_receiver(
    ns: &str,
    port: u16,
    group: Option<(std::net::Ipv4Addr, std::net::Ipv4Addr)>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> (std::sync::mpsc::Receiver<()>, std::thread::JoinHandle<Vec<Vec<u8>>>) {
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let path = format!("/run/netns/{ns}");
    let t = std::thread::spawn(move || {
        use std::os::fd::AsRawFd;
        let f = std::fs::File::open(&path).unwrap();
        // SAFETY: setns(2) on this thread only, with a namespace descriptor this test opened.
        assert_eq!(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) }, 0, "setns {path}");
        let s = std::net::UdpSocket::bind(("0.0.0.0", port)).unwrap();
        if let Some((g, local)) = group {
            s.join_multicast_v4(&g, &local).unwrap();
        }
        s.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        ready_tx.send(()).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 2048];
        loop {
            match s.recv(&mut buf) {
                Ok(n) => got.push(buf[..n].to_vec()),
                Err(_) if stop.load(std::sync::atomic::Ordering::Relaxed) => return got,
                Err(_) => {}
            }
        }
    });
    (ready, t)
}

/// (flow, seq, txtime) of a datagram payload that starts with the test header's bytes from the magic on.
fn test_payload(p: &[u8]) -> Option<(u16, u64, i64)> {
    let mut frame = vec![0u8; 14];
    frame[12..14].copy_from_slice(&[0x88, 0xB5]);
    frame.extend_from_slice(p);
    keepon_core::testframe::TestHeader::parse(&frame).ok().map(|h| (h.flow, h.seq, h.txtime))
}

/// The same program with `--udp`: a UDP socket bound to kp0 (`SO_BINDTODEVICE`), datagrams to a multicast group,
/// then to a unicast address whose neighbour entry is static, then to one with none. keepon builds each frame
/// (Ethernet, IPv4 with checksum, UDP with checksum) and sends it in its slot; the error queue is that of a UDP
/// socket (`SOL_IP`/`IP_RECVERR`, the whole frame as payload of txtime errors, none with `OPT_TSONLY`); the
/// kernel's own UDP receivers behind the bridge get every datagram keepon reports sent, intact; a datagram with
/// no neighbour entry for its next hop is refused at send with `EHOSTUNREACH` and never reaches the daemon.
#[test]
fn preload_udp_through_a_bridge() {
    let Some((lib, sender, dir, topo)) = bridge_setup("ku") else { return };
    let (d, sock) = (dir.path(), dir.path().join("keepon.sock"));
    let lcsv = d.join("L.csv");
    ip(&["-n", &topo.talker, "addr", "add", "10.77.0.1/24", "dev", "kp0"]);
    ip(&["-n", &topo.listener, "addr", "add", "10.77.0.2/24", "dev", "kp1"]);
    let kp1_mac = Command::new("ip")
        .args(["netns", "exec", &topo.listener, "cat", "/sys/class/net/kp1/address"])
        .output()
        .unwrap()
        .stdout;
    let kp1_mac = String::from_utf8_lossy(&kp1_mac).trim().to_string();
    ip(&["-n", &topo.talker, "neigh", "replace", "10.77.0.2", "lladdr", &kp1_mac, "dev", "kp0", "nud", "permanent"]);

    let group = std::net::Ipv4Addr::new(239, 1, 2, 3);
    let local = std::net::Ipv4Addr::new(10, 77, 0, 2);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (mready, mcast) = kernel_receiver(&topo.listener, 5000, Some((group, local)), stop.clone());
    let (uready, ucast) = kernel_receiver(&topo.listener, 5001, None, stop.clone());
    mready.recv_timeout(Duration::from_secs(5)).expect("multicast receiver");
    uready.recv_timeout(Duration::from_secs(5)).expect("unicast receiver");
    let (mut listener, mut daemon) = listener_and_daemon(d, &topo, &lcsv);
    // Each run's base: a ring-slot-0 start 50 cycles (160 ms) ahead when it starts.
    let run = |name: &str, to: &str, args: &dyn Fn(&mut Command, i64)| {
        let info = Client::connect(&sock).and_then(|mut c| c.info()).expect("daemon info");
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &topo.talker]).arg(&sender).args(["--udp", to]);
        args(&mut cmd, info.cycle_start + 50 * CYCLE);
        preload_env(&mut cmd, &lib, &sock, "kp0");
        let mut prog = Proc::spawn(name, d, &mut cmd);
        let out = prog.success(Duration::from_secs(10));
        (out, prog.output())
    };
    // Multicast: the full program (two flows, a passed txtime, one too soon).
    let (mout, mall) = run("udp-multicast", "239.1.2.3:5000", &|c, base| sender_args(c, "kp0", base));
    // Unicast to the static neighbour: 3 frames of flow 0.
    let (uout, _) = run("udp-unicast", "10.77.0.2:5001", &|c, base| {
        c.args(["kp0", &base.to_string(), &CYCLE.to_string(), "3", "3", "0"]);
    });
    // No neighbour entry for 10.77.0.9: refused at send.
    let (nout, nall) = run("udp-unresolved", "10.77.0.9:5001", &|c, base| {
        c.args(["kp0", &base.to_string(), &CYCLE.to_string(), "1", "3", "0"]);
    });
    let (daemon_out, listen_out) = stop_daemon_and_listener(&mut daemon, &mut listener);
    // Every frame has left (the daemon has exited): the receivers end once their queues are read.
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let multicast_got = mcast.join().unwrap();
    let unicast_got = ucast.join().unwrap();
    println!("{mall}{daemon_out}\n{listen_out}\n{nall}");
    let underruns = number_before(&daemon_out, "underruns").expect("daemon summary");

    // The multicast run reads like the AF_PACKET one, with a UDP socket's error queue.
    let log = parse_log(&mout);
    let (mut sent, lags) = check(&log, underruns, Wire::Slot, Pacing::Host, true);
    assert!(lags.iter().any(|&l| l > 0), "software stamps are release times: {lags:?}");
    for line in mout.lines().filter(|l| l.starts_with("errq ")) {
        assert_eq!(field(line, "level"), "ip", "a UDP socket's error queue: {line}");
        let want = if line.starts_with("errq tstamp ") { 0 } else { 100 };
        assert_eq!(num(line, "len"), want, "payload: none with OPT_TSONLY, else the whole frame: {line}");
    }
    // The kernel's receiver got exactly the multicast datagrams keepon sent (flow 0), intact.
    let mut mtimes: Vec<i64> = multicast_got
        .iter()
        .map(|p| test_payload(p).unwrap_or_else(|| panic!("not a test payload: {p:?}")))
        .inspect(|&(flow, _, _)| assert_eq!(flow, 0, "only flow 0 leaves"))
        .map(|(_, _, t)| t)
        .collect();
    mtimes.sort_unstable();
    sent.sort_unstable();
    assert_eq!(mtimes, sent, "every multicast datagram keepon sent reached the kernel's receiver, and no other");

    // Unicast: sent (or missed after an underrun) and received by the kernel's socket on port 5001.
    let ulog = parse_log(&uout);
    let usent: Vec<i64> = ulog.stamps.keys().map(|k| ulog.sends[k].1).collect();
    assert!(underruns > 0 || usent.len() == 3, "{uout}");
    let mut utimes: Vec<i64> = unicast_got.iter().filter_map(|p| test_payload(p)).map(|(_, _, t)| t).collect();
    utimes.sort_unstable();
    assert_eq!(utimes, usent, "unicast datagrams reached the kernel's receiver: {uout}");

    // No neighbour: refused at send, nothing queued, never handed to keepon.
    assert!(nout.contains("error=No route to host") && !nout.contains("errq "), "{nout}");
    assert!(nall.contains("no neighbour entry for its next hop"), "{nall}");

    // The keepon listener heard the flow-0 frames of both runs, nothing else.
    let heard = record::read(&lcsv).unwrap();
    assert!(heard.iter().all(|r| r.flow == "flow-0"), "only flow 0 crosses: {heard:?}");
    assert_eq!(heard.len(), sent.len() + usent.len(), "{listen_out}");
}

/// The daemon dies (SIGKILL) while the program's frames wait for their slots. (A daemon stopped by SIGTERM sends
/// the frames it accepted first: `netns_daemon.rs` tests that.) Every frame still ends in exactly one error-queue
/// message: a TX timestamp for those reported sent before the daemon died, `ECANCELED`/`SO_EE_CODE_TXTIME_MISSED`
/// for the rest, as ETF reports frames it could not send; the program itself runs to its end.
#[test]
fn preload_when_the_daemon_dies_mid_run() {
    if !is_root() {
        println!("skipping: needs root (AF_PACKET socket in a network namespace)");
        return;
    }
    let Some((lib, sender)) = build() else { return };
    let (dir, ns, _guard, mut daemon, base) = sim_daemon_and_namespace("kps", "20s", false);
    let (d, sock) = (dir.path(), dir.path().join("keepon.sock"));
    // 10 frames 10 cycles (32 ms) apart from LEAD_CYCLES ahead.
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &ns]).arg(&sender);
    cmd.args(["lo", &base.to_string(), &(10 * CYCLE).to_string(), "10", "3", "0"]);
    preload_env(&mut cmd, &lib, &sock, "lo");
    let mut prog = Proc::spawn("etf-sender", d, &mut cmd);
    // Kill the daemon once the program has sent its frames and the first few slots have passed.
    let stop_at = base + 3 * 10 * CYCLE + CYCLE / 2;
    let wait = stop_at - support::tai_now_ns();
    std::thread::sleep(Duration::from_nanos(u64::try_from(wait).unwrap_or(0)));
    // SAFETY: kill(2) on the daemon this test started (`chrt` execs keepon in the same process).
    assert_eq!(unsafe { libc::kill(daemon.pid() as libc::pid_t, libc::SIGKILL) }, 0);
    let killed = daemon.wait(Duration::from_secs(10)).unwrap();
    assert!(!killed.success(), "the daemon was killed");
    let out = prog.success(Duration::from_secs(10));
    println!("{}", prog.output());
    let log = parse_log(&out);
    assert_eq!(log.sends.len(), 10, "{out}");
    let (mut stamped, mut missed) = (0, 0);
    for (&key, &(_, txtime, ok)) in &log.sends {
        assert!(ok, "frame {key} accepted at send");
        let errs: Vec<_> = log.errors.iter().filter(|e| e.2 == txtime).collect();
        let stamp = log.stamps.get(&key);
        assert_eq!(errs.len() + usize::from(stamp.is_some()), 1, "frame {key}: exactly one ending: {errs:?} {stamp:?}");
        match errs.first() {
            Some(e) => {
                assert_eq!((e.0.as_str(), e.1.as_str()), ("ECANCELED", "MISSED"), "frame {key}");
                // Only frames whose slot had not come yet when the daemon died.
                assert!(txtime > stop_at - 10 * CYCLE, "frame {key} at {txtime} missed, long before the kill");
                missed += 1;
            }
            None => {
                assert!(txtime < stop_at + 10 * CYCLE, "frame {key} at {txtime} sent after the daemon died");
                stamped += 1;
            }
        }
    }
    println!("{stamped} sent, {missed} missed");
    assert!(missed >= 5, "frames after the kill are reported missed: {stamped} sent, {missed} missed");
    assert!(prog.output().contains("the daemon went away"), "the preload says why: {}", prog.output());
}

/// Issue 19's case: an `SO_TXTIME` program timed on whole TAI seconds, under the preload, for a class that owns 2
/// of 20 slots (a 2 ms cycle: every whole second starts a cycle of the schedule, whose base time is 0). Before the
/// schedule was on network time, the cycle's phase was wherever the link happened to come up: 0 of 360 frames sent
/// in two runs, all in a third. Now three runs, each with a daemon started afresh, send every frame (but where a
/// host stall underran the simulated link, which the daemon reports).
#[test]
fn a_program_timed_on_whole_tai_seconds_hits_its_windows_in_every_run() {
    if !is_root() {
        println!("skipping: needs root (AF_PACKET socket in a network namespace)");
        return;
    }
    let Some((lib, sender)) = build() else { return };
    for run in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let sock = d.join("keepon.sock");
        let cfg = config(&sock, false).replace("slots = 32             # cycle 3.2 ms", "slots = 20").replace(
            "batch = 24             # 2.4 ms posted ahead: a host stall shorter than that does not underrun",
            "batch = 16",
        );
        // The program sends every frame at once, up to 1.7 s ahead: the daemon must accept that far.
        let cfg = cfg
            .replace("slot_masks = \"0x01,0x20002,0\"", "slot_masks = \"0x3,0\"")
            .replace("poll_period = \"50us\"", "poll_period = \"50us\"\nmax_advance = \"3s\"");
        std::fs::write(d.join("D.toml"), cfg).unwrap();
        let (ns, _guard) = support::lone_namespace("kpw");
        let mut daemon = Proc::spawn(
            "daemon",
            d,
            &mut daemon_cmd(None, &d.join("D.toml"), &["--backend", "sim", "--duration", "4s"]),
        );
        assert!(wait_until(Duration::from_secs(5), || sock.exists()), "daemon socket\n{}", daemon.output());
        // The next whole TAI second at least half a second away; frames at +0 and +100 µs (ring slots 0 and 1),
        // every 10 ms.
        let now = support::tai_now_ns();
        let base = (now + 500_000_000).div_euclid(1_000_000_000) * 1_000_000_000 + 1_000_000_000;
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &ns]).arg(&sender);
        cmd.args(["lo", &base.to_string(), "10000000", "20", "3", "0", "100000"]);
        preload_env(&mut cmd, &lib, &sock, "lo");
        let mut prog = Proc::spawn("etf-sender", d, &mut cmd);
        let out = prog.success(Duration::from_secs(10));
        let daemon_out = daemon.success(Duration::from_secs(10));
        let underruns = number_before(&daemon_out, "underruns").expect("daemon summary");
        let log = parse_log(&out);
        let sent = log.stamps.len();
        println!(
            "run {run}: {sent} of {} frames sent at whole-second offsets ({underruns} underruns)",
            log.sends.len()
        );
        assert_eq!(log.sends.len(), 40);
        assert!(
            sent == 40 || underruns > 0 && log.errors.iter().all(|e| e.1 == "MISSED"),
            "run {run}: {sent} of 40 sent, errors {:?}\n{}",
            log.errors,
            prog.output()
        );
    }
}
