//! The `keepon` command.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use keepon::backend::{self, BackendOptions};
use keepon::config::{parse_duration, Config};
use keepon::daemon::{serve_with, DaemonConfig, PtpLink};
use keepon::netrun::run_on_network_time;
use keepon::ptpconf::PtpConfig;
use keepon::realtime::Realtime;
use keepon::record;
use keepon::run::{drive, run_sim, RunOptions};
use keepon::{listen, report, table3, talk, TIMING_DIAGRAM};
use keepon_core::frer::recovery::{Algorithm, RecoveryConfig};
use keepon_core::frer::FrerError;
use keepon_core::time::Nanos;
use keepon_nic::linux::etf::EtfOptions;

/// Backend selection shared by `run` and `daemon`.
#[derive(clap::Args, Clone, Debug)]
struct BackendArgs {
    /// Backend (overrides run.backend): sim, afpacket, afpacket-ring, afxdp, etf.
    #[arg(long)]
    backend: Option<String>,
    /// Interface for afpacket/afxdp.
    #[arg(long)]
    iface: Option<String>,
    /// TX queue (afxdp).
    #[arg(long, default_value_t = 0)]
    queue: u32,
    /// Filler mode: auto, reserved-address, bad-fcs.
    #[arg(long)]
    filler: Option<String>,
    /// Pacing: auto (host-paced on links without a speed, e.g. veth), host, line.
    #[arg(long)]
    pacing: Option<String>,
    /// AF_XDP zero-copy (fails if the driver has none).
    #[arg(long)]
    zero_copy: bool,
    /// etf: install a root ETF qdisc on --iface with tc (needs CAP_NET_ADMIN) instead of requiring one.
    #[arg(long)]
    install_qdisc: bool,
    /// etf: `delta` (ns) of the qdisc --install-qdisc installs.
    #[arg(long, default_value_t = 500_000)]
    etf_delta: i32,
    /// etf: install the qdisc with `offload` (the NIC's LaunchTime).
    #[arg(long)]
    etf_offload: bool,
}

impl BackendArgs {
    fn options(&self) -> BackendOptions {
        BackendOptions {
            backend: self.backend.clone(),
            iface: self.iface.clone(),
            queue: self.queue,
            filler: self.filler.clone(),
            pacing: self.pacing.clone(),
            zero_copy: self.zero_copy,
            etf: EtfOptions { install_qdisc: self.install_qdisc, delta_ns: self.etf_delta, offload: self.etf_offload },
        }
    }
}

fn duration_arg(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    u64::try_from(d.0).map(Duration::from_nanos).map_err(|_| format!("`{s}` must not be negative"))
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// keepon: deterministic, time-scheduled Ethernet transmission on standard NICs, in software.
#[derive(Parser)]
#[command(version, about, after_long_help = TIMING_DIAGRAM)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a station with the configuration's flows and record every frame.
    Run {
        /// Runtime configuration (TOML, see docs/config.md).
        #[arg(long)]
        config: PathBuf,
        /// Per-frame records (CSV).
        #[arg(long)]
        records: Option<PathBuf>,
        /// Write the wire as a nanosecond pcap.
        #[arg(long)]
        pcap: Option<PathBuf>,
        /// Include filler slots in the pcap.
        #[arg(long)]
        pcap_fillers: bool,
        #[command(flatten)]
        backend: BackendArgs,
        /// With `[ptp]`: how long to wait for synchronisation before the first frame.
        #[arg(long, value_parser = duration_arg, default_value = "60s")]
        sync_wait: Duration,
        /// With `[ptp]`: how long to wait for outstanding outcomes after the last frame.
        #[arg(long, value_parser = duration_arg, default_value = "5s")]
        grace: Duration,
    },
    /// Serve applications on a local UNIX socket (daemon.socket): frames with a txtime in, one outcome each out.
    Daemon {
        /// Runtime configuration with a [daemon] section.
        #[arg(long)]
        config: PathBuf,
        #[command(flatten)]
        backend: BackendArgs,
        /// Stop after this long (e.g. 30s); default: until SIGINT/SIGTERM.
        #[arg(long, value_parser = duration_arg)]
        duration: Option<Duration>,
    },
    /// Submit the configuration's flows through a running daemon and record every frame's outcome.
    Talk {
        /// The daemon's socket.
        #[arg(long)]
        socket: PathBuf,
        /// Runtime configuration (its flows and classes).
        #[arg(long)]
        config: PathBuf,
        /// Per-frame records (CSV).
        #[arg(long)]
        records: Option<PathBuf>,
        /// How long to wait for outstanding outcomes after the last frame, or after SIGINT/SIGTERM.
        #[arg(long, value_parser = duration_arg, default_value = "5s")]
        grace: Duration,
        /// How long to wait for a daemon that runs PTP to be synchronised before the first frame.
        #[arg(long, value_parser = duration_arg, default_value = "60s")]
        sync_wait: Duration,
    },
    /// Receive keepon test frames on one or more interfaces and record them (receive timestamps), counting fillers;
    /// eliminate the duplicate copies of R-TAGged frames (IEEE 802.1CB FRER).
    Listen {
        /// Interface; give it more than once to receive on several (each copy of an R-TAGged frame is recorded with
        /// the interface it arrived on, the first copy of each sequence number passed).
        #[arg(long, required = true)]
        iface: Vec<String>,
        /// Per-frame records (CSV), readable by `keepon report`.
        #[arg(long)]
        records: PathBuf,
        /// Configuration, to name flows and classes.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Stop after this long (SIGINT or SIGTERM stop it earlier; the records are written either way).
        #[arg(long, value_parser = duration_arg, default_value = "10s")]
        duration: Duration,
        /// Stop after this many test frames (every copy counts).
        #[arg(long)]
        count: Option<u64>,
        /// FRER vector recovery: how many sequence numbers its history holds (2..=32768; the standard's default 2).
        #[arg(long, default_value_t = keepon_core::frer::recovery::DEFAULT_HISTORY, conflicts_with = "frer_match")]
        frer_history: u32,
        /// FRER: go back to taking any sequence number after this many ms without a frame passed.
        #[arg(long, default_value_t = 1000)]
        frer_reset_ms: u64,
        /// FRER: match recovery (discard only a repeat of the last sequence number) instead of vector recovery.
        #[arg(long)]
        frer_match: bool,
    },
    /// Change a running daemon's schedule without a restart (IEEE 802.1Qbv admin → oper).
    Schedule {
        #[command(subcommand)]
        cmd: ScheduleCmd,
    },
    /// A running daemon's state: link, host, sync, schedule alignment, per-class counters, underruns, clients.
    Status {
        /// The daemon's socket.
        #[arg(long, default_value = "/run/keepon.sock")]
        socket: PathBuf,
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Per-flow statistics of a records file.
    Report {
        /// Records (CSV) from `keepon run` or `keepon listen`.
        records: PathBuf,
        /// Also draw its inter-arrival histogram and deviation over time into this directory (Python with
        /// keepon-plan: `KEEPON_PYTHON`, default python3).
        #[arg(long)]
        plot: Option<PathBuf>,
    },
    /// One of the paper's experiments on the simulated NIC (keepon vs its baselines): raw CSV + summary in --out;
    /// `network --plan DIR`: a `keepon-plan network` plan replayed, its talkers as keepon stations.
    Eval {
        /// Experiment.
        #[arg(value_parser = clap::builder::PossibleValuesParser::new(
            keepon_eval::cli::EXPERIMENTS.into_iter().chain(["network"])
        ))]
        name: String,
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
        /// Frames per cell (default: the experiment's).
        #[arg(long)]
        frames: Option<u64>,
        /// Seed of every draw (default 1).
        #[arg(long)]
        seed: Option<u64>,
        /// network: the plan directory written by `keepon-plan network`.
        #[arg(long)]
        plan: Option<PathBuf>,
        /// network: network time replayed (default 200ms).
        #[arg(long)]
        duration: Option<String>,
    },
    /// The paper's Table 3 (relative throughput vs batch × poll period) on the simulated NIC.
    Table3 {
        /// Simulated time per cell, ms.
        #[arg(long, default_value_t = 100)]
        span_ms: i64,
    },
}

/// `keepon schedule` subcommands.
#[derive(Subcommand, Debug)]
enum ScheduleCmd {
    /// Take FILE's schedule from its base time on: `ieee802-dot1q-sched` instance data (RFC 7951 JSON, as
    /// `keepon-plan network` writes under yang/; gate b is class tc<b>) or a keepon configuration (its classes'
    /// slots and [schedule] base_time). Frames due before the base time keep the old windows; frames already
    /// submitted that the change leaves without a slot are rejected `schedule-change`. A base time whose slot the
    /// NIC already has is refused.
    Apply {
        /// The schedule (.json: YANG instance data; otherwise a keepon configuration).
        file: PathBuf,
        /// The daemon's socket.
        #[arg(long, default_value = "/run/keepon.sock")]
        socket: PathBuf,
        /// The interface whose gate list to take, in a YANG document with several.
        #[arg(long)]
        port: Option<String>,
        /// Take effect from this network time instead (TAI ns).
        #[arg(long)]
        base_time: Option<i64>,
        /// Send the schedule as windows in ns (what a byte-clock daemon takes): a gate list's entries as they are,
        /// over one cycle of the daemon's (a byte-clock configuration is always sent so).
        #[arg(long)]
        windows: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("keepon: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The listener's FRER sequence recovery settings from its options, checked (an error names the option).
fn frer_settings(history: u32, reset_ms: u64, matching: bool) -> Result<RecoveryConfig, String> {
    let algorithm = if matching { Algorithm::Match } else { Algorithm::Vector { history } };
    let reset = i64::try_from(reset_ms).ok().and_then(|ms| ms.checked_mul(1_000_000)).unwrap_or(0);
    RecoveryConfig::new(algorithm, Nanos(reset)).map_err(|e| match e {
        FrerError::History(_) => format!("--frer-history {history}: {e}"),
        _ => format!("--frer-reset-ms {reset_ms}: must be within 1..=9223372036854 ms"),
    })
}

/// Print what a talk (or a run on network time) did; an error if frames got no outcome.
fn print_talk(out: &talk::TalkOutput, who: &str) -> Result<(), String> {
    let rejected: u64 = out.rejected.values().sum();
    println!(
        "{who}: {} frames, {} sent, {} rejected, {} without outcome, {} submitted behind schedule",
        out.frames,
        out.sent,
        rejected - out.missing as u64,
        out.missing,
        out.behind
    );
    for (why, n) in out.rejected.iter().filter(|(why, _)| why.as_str() != "no-outcome") {
        println!("  rejected {why}: {n}");
    }
    // Release times (host-paced links): the line `keepon run` prints, from the daemon's `Released` messages.
    if let Some(line) = out.summary.render_release() {
        print!("  {line}");
    }
    match (out.stopped, out.missing) {
        (true, 0) => println!("{who}: stopped by a signal; every frame submitted before it has its outcome above"),
        (true, _) => println!("{who}: stopped by a signal"),
        _ => {}
    }
    if let Some(why) = &out.failed {
        return Err(format!("{why}; {} frames submitted before it got no outcome", out.missing));
    }
    if out.missing > 0 {
        return Err(format!("{} frames got no outcome within the grace period", out.missing));
    }
    Ok(())
}

/// PTP's view of a real link: receive on the same interface (software or hardware stamps); none on the
/// simulated NIC.
fn ptp_link(cfg: &Config, opts: &BackendOptions) -> Result<Option<PtpLink>, String> {
    match &opts.iface {
        Some(iface) if opts.backend.as_deref().unwrap_or(&cfg.backend) != "sim" => {
            let rx =
                keepon_nic::linux::rx::Receiver::open(iface).map_err(|e| format!("ptp: receiver on {iface}: {e}"))?;
            Ok(Some(PtpLink { mac: rx.link().mac, rx: Box::new(rx) }))
        }
        _ => Ok(None),
    }
}

/// SIGINT and SIGTERM set [`STOP`].
fn on_signals() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.cmd {
        Cmd::Run { config, records, pcap, pcap_fillers, backend, sync_wait, grace } => {
            cmd_run(&config, records, pcap, pcap_fillers, backend, sync_wait, grace)
        }
        Cmd::Daemon { config, backend, duration } => cmd_daemon(&config, backend, duration),
        Cmd::Talk { socket, config, records, grace, sync_wait } => {
            let cfg = Config::load(&config).map_err(|e| e.to_string())?;
            on_signals();
            let out = talk::talk(&cfg, &socket, grace, sync_wait, records.as_deref(), &STOP)?;
            let missing = print_talk(&out, "talk");
            if let Some(p) = &records {
                println!("records: {} ({} frames)", p.display(), out.records_written);
            }
            missing
        }
        Cmd::Listen { iface, records, config, duration, count, frer_history, frer_reset_ms, frer_match } => {
            cmd_listen(&iface, &records, config, duration, count, frer_history, frer_reset_ms, frer_match)
        }
        Cmd::Schedule { cmd: ScheduleCmd::Apply { file, socket, port, base_time, windows } } => {
            let s = keepon::schedule::apply(&socket, &file, port.as_deref(), base_time, windows)?;
            println!(
                "schedule: accepted; takes effect at {} ns (TAI); {} frames already submitted lost their slot \
                 (rejected schedule-change)",
                s.time, s.rejected
            );
            Ok(())
        }
        Cmd::Status { socket, json } => {
            let st = keepon::status::query(&socket)?;
            if json {
                println!("{}", st.json(&socket));
            } else {
                print!("{}", st.render(&socket));
            }
            Ok(())
        }
        Cmd::Report { records, plot } => {
            let recs = record::read(&records)?;
            print!("{}", report::render(&recs));
            if let Some(dir) = plot {
                print!("{}", keepon_eval::plot::records(&keepon_eval::plot::python(), &records, &dir)?);
            }
            Ok(())
        }
        Cmd::Eval { name, out, seed, plan: Some(plan), duration, frames } if name == "network" => {
            if frames.is_some() {
                return Err("keepon eval network replays --duration of network time, not --frames".into());
            }
            let duration_ns = duration.map(|d| parse_duration(&d).map(|n| n.0)).transpose()?;
            let opts = keepon_eval::netreport::NetOptions { seed, duration_ns };
            print!("{}", keepon_eval::netreport::run(&plan, &out, &opts, &mut |l| eprintln!("{l}"))?);
            Ok(())
        }
        Cmd::Eval { name, .. } if name == "network" => {
            Err("keepon eval network replays a plan: keepon eval network --plan DIR --out OUT".into())
        }
        Cmd::Eval { name, out, frames, seed, plan, duration } => {
            if plan.is_some() || duration.is_some() {
                return Err(format!("--plan and --duration are for `keepon eval network`, not {name}"));
            }
            let summary = keepon_eval::cli::run(&name, &out, &keepon_eval::cli::EvalOptions { frames, seed })?;
            print!("{summary}");
            Ok(())
        }
        Cmd::Table3 { span_ms } => {
            let model = table3::default_model();
            if !(1..=table3::MAX_SPAN_MS).contains(&span_ms) {
                return Err(format!(
                    "--span-ms {span_ms}: must be within 1..={} (ms of simulated time per cell)",
                    table3::MAX_SPAN_MS
                ));
            }
            let span = Nanos::from_ms(span_ms);
            let cells = table3::table(model, span)?;
            print!("{}", table3::render(model, span, &cells, None));
            Ok(())
        }
    }
}

/// `keepon run`: the configuration's flows on the station (on network time with `[ptp]`).
fn cmd_run(
    config: &Path,
    records: Option<PathBuf>,
    pcap: Option<PathBuf>,
    pcap_fillers: bool,
    backend: BackendArgs,
    sync_wait: Duration,
    grace: Duration,
) -> Result<(), String> {
    let cfg = Config::load(config).map_err(|e| e.to_string())?;
    if PtpConfig::from_config(&cfg).map_err(|e| format!("{}: {e}", config.display()))?.is_some() {
        // Network time: the daemon's PTP and sync gate with the talker's replay, in this process.
        let opts = backend.options();
        let realtime = Realtime::from_config(&cfg).map_err(|e| format!("{}: {e}", config.display()))?;
        let mut nic_cfg = cfg.clone();
        nic_cfg.sim.keep_fillers = pcap.is_some() && pcap_fillers;
        let (nic, _) = backend::open(&nic_cfg, &opts, true)?;
        // The station's loop runs on this thread (the talker on another, which inherits this).
        let applied = realtime.apply();
        println!(
            "keepon run: {} · network time ([ptp]), waiting up to {} s for synchronisation · {}",
            nic.describe(),
            sync_wait.as_secs(),
            applied.describe()
        );
        if let Some(w) = applied.warning() {
            eprintln!("keepon run: {w}");
        }
        let link = ptp_link(&cfg, &opts)?;
        on_signals();
        let out = run_on_network_time(&cfg, nic, link, sync_wait, grace, records.as_deref(), pcap.as_deref(), &STOP)?;
        let missing = print_talk(&out.talk, "run");
        println!("keepon run: {} underruns", out.daemon.underruns);
        if let Some(p) = &records {
            println!("records: {} ({} frames)", p.display(), out.talk.records_written);
        }
        if let Some(p) = &pcap {
            println!("pcap: {} (each slot at its EPHC time: network time)", p.display());
        }
        return missing;
    }
    on_signals();
    let opts = RunOptions { records: records.clone(), pcap: pcap.clone(), pcap_fillers, stop: Some(&STOP) };
    let name = backend.backend.clone().unwrap_or_else(|| cfg.backend.clone());
    let out = if name == "sim" {
        run_sim(&cfg, &opts)?
    } else {
        let (nic, _) = backend::open(&cfg, &backend.options(), false)?;
        drive(&cfg, nic, &opts)?
    };
    print_summary(&cfg, &out);
    if out.stopped {
        println!("run: stopped by a signal; frames not yet posted were rejected `shutdown`");
    }
    if let Some(p) = &records {
        println!("records: {} ({} frames)", p.display(), out.records_written);
    }
    if let Some(p) = &pcap {
        println!("pcap: {}", p.display());
    }
    if let Some(e) = &out.output_error {
        return Err(e.clone());
    }
    if out.timed_out {
        return Err("the run hit run.max_duration; frames still pending were rejected (shutdown)".into());
    }
    Ok(())
}

/// `keepon daemon`: serve applications on the station until stopped.
fn cmd_daemon(config: &Path, backend: BackendArgs, duration: Option<Duration>) -> Result<(), String> {
    let cfg = Config::load(config).map_err(|e| e.to_string())?;
    let dcfg = DaemonConfig::from_config(&cfg).map_err(|e| format!("{}: {e}", config.display()))?;
    let ptp = PtpConfig::from_config(&cfg).map_err(|e| format!("{}: {e}", config.display()))?;
    let opts = backend.options();
    let realtime = Realtime::from_config(&cfg).map_err(|e| format!("{}: {e}", config.display()))?;
    let (nic, _) = backend::open(&cfg, &opts, true)?;
    // systemd (Type=notify): READY=1 once the socket listens; its watcher starts before SCHED_FIFO.
    let ready = keepon::notify::Readiness::watch(&dcfg.socket, dcfg.mode);
    // The poll loop runs on this thread: what it asks of the host is applied here.
    let applied = realtime.apply();
    let mut dcfg = dcfg;
    dcfg.host = applied.flags();
    let link = backend::describe_for(&cfg, nic.describe());
    dcfg.banner = Some(format!("keepon daemon: {link} · socket {} · {}", dcfg.socket.display(), applied.describe()));
    if let Some(w) = applied.warning() {
        eprintln!("keepon daemon: {w}");
    }
    let link = if ptp.is_some() { ptp_link(&cfg, &opts)? } else { None };
    on_signals();
    let d = duration.map(|d| Nanos(d.as_nanos() as i64));
    let stats = serve_with(&cfg, &dcfg, nic, link, &STOP, d);
    ready.stopping();
    let stats = stats?;
    println!(
        "keepon daemon: {} connections, {} refused, {} frames, {} malformed requests, {} connections dropped, \
         {} underruns",
        stats.connections, stats.refused, stats.frames, stats.malformed, stats.dropped, stats.underruns
    );
    Ok(())
}

/// `keepon listen`: capture keepon frames on one or more interfaces (eliminating FRER copies), then report.
#[allow(clippy::too_many_arguments)]
fn cmd_listen(
    iface: &[String],
    records: &Path,
    config: Option<PathBuf>,
    duration: Duration,
    count: Option<u64>,
    frer_history: u32,
    frer_reset_ms: u64,
    frer_match: bool,
) -> Result<(), String> {
    let cfg = match config {
        Some(p) => Some(Config::load(&p).map_err(|e| e.to_string())?),
        None => None,
    };
    let frer = frer_settings(frer_history, frer_reset_ms, frer_match)?;
    on_signals();
    let out =
        listen::listen(iface, cfg.as_ref(), frer, duration, count, &STOP, |on| println!("listen: receiving on {on}"))?;
    println!(
        "listen: {} keepon frames, {} fillers, {} other frames; timestamps: {:?}; {} dropped at the socket",
        out.records.len(),
        out.fillers,
        out.other,
        out.timestamps,
        out.socket_drops
    );
    if out.per_iface.len() > 1 {
        let each: Vec<String> = out.per_iface.iter().map(|(i, n)| format!("{i} {n}")).collect();
        println!("  keepon frames per interface: {}", each.join(", "));
    }
    for (flow, (n, gaps, reordered)) in &out.per_flow {
        println!("  flow {flow}: {n} received, {gaps} missing in sequence, {reordered} out of order");
    }
    for (flow, c) in &out.frer {
        println!(
            "  frer {flow}: {} passed, {} discarded, {} out of order, {} lost, {} rogue, {} resets, {} tagless",
            c.passed, c.discarded, c.out_of_order, c.lost, c.rogue, c.resets, c.tagless
        );
    }
    record::write(records, &out.records).map_err(|e| format!("cannot write {}: {e}", records.display()))?;
    Ok(())
}

fn print_summary(cfg: &Config, out: &keepon::run::RunOutput) {
    let c = &out.counters;
    println!("backend: {}", out.backend);
    println!("timing: {}", out.timing);
    println!(
        "link {} · slot {} B (δ = {}) · ring {} · batch {} · policy {}{}",
        cfg.geometry.rate(),
        cfg.geometry.slot_bytes(),
        cfg.geometry.period(),
        cfg.ownership.ring(),
        cfg.batch,
        cfg.policy,
        match cfg.timing {
            keepon::config::WireTiming::Slots => "",
            keepon::config::WireTiming::Bytes if cfg.windows.is_some() =>
                " · byte clock (frames on the byte of their txtime, unpadded; the classes' time windows)",
            keepon::config::WireTiming::Bytes =>
                " · byte clock (frames on the byte of their txtime, unpadded; the slot masks as time windows)",
        }
    );
    let fillers = if out.timing == keepon_nic::Timing::KernelTxtime {
        "none (the kernel's ETF paces the frames)".to_string()
    } else {
        c.fillers_sent.to_string()
    };
    println!(
        "frames: {} submitted, {} sent, {} rejected · fillers sent {} · underruns {}",
        c.submitted,
        c.sent,
        c.rejected_total(),
        fillers,
        c.underruns
    );
    if let Some(w) = out.wire {
        println!("wire: {} descriptors, busy {:.4} %, {} gaps", w.slots, w.busy_ppm() as f64 / 1e4, w.gaps);
    }
    if let Some(kib) = peak_rss_kib() {
        println!(
            "memory: peak RSS {:.1} MiB (records are streamed: memory does not grow with the run's length)",
            kib as f64 / 1024.0
        );
    }
    let sm = &out.summary;
    println!("timing: {}/{} sent frames left at exactly their EPHC slot time ({})", sm.exact_ephc, sm.sent, out.timing);
    if let Some(r) = sm.render_release() {
        print!("{r}");
    }
    print!("{}", sm.render_schedule(cfg.tolerance.0));
    print!("{}", out.grid.render());
    for f in &cfg.flows {
        let Some(fs) = sm.flows.get(&f.name) else { continue };
        let ia = &fs.inter_arrival;
        let range = match ia.n {
            0 => "—".to_string(),
            _ if ia.min == ia.max => format!("all {} ns apart", ia.min),
            _ => format!("{}..{} ns apart", ia.min, ia.max),
        };
        let rejected: Vec<String> = fs.rejected.iter().map(|(why, n)| format!("{n} {why}")).collect();
        let rejected =
            if rejected.is_empty() { String::new() } else { format!(" (rejected: {})", rejected.join(", ")) };
        println!(
            "  flow {:<12} class {:<8} {}/{} sent{rejected}, received {range}",
            f.name, f.class_name, fs.sent, fs.frames
        );
    }
}

/// The process's peak resident set size (`VmHWM` in `/proc/self/status`), in KiB, where the OS reports it.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
