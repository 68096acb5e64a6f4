//! The `keepon` command.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use keepon::config::Config;
use keepon::record;
use keepon::run::{run_sim, RunOptions};
use keepon::{report, table3, TIMING_DIAGRAM};
use keepon_core::time::Nanos;

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
        /// Backend (overrides run.backend): sim, afxdp, afpacket.
        #[arg(long)]
        backend: Option<String>,
    },
    /// Per-flow statistics of a records file.
    Report {
        /// Records (CSV) from `keepon run` or `keepon listen`.
        records: PathBuf,
    },
    /// The paper's Table 3 (relative throughput vs batch × poll period) on the simulated NIC.
    Table3 {
        /// Simulated time per cell, ms.
        #[arg(long, default_value_t = 100)]
        span_ms: i64,
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

fn run(cli: Cli) -> Result<(), String> {
    match cli.cmd {
        Cmd::Run { config, records, pcap, pcap_fillers, backend } => {
            let cfg = Config::load(&config).map_err(|e| e.to_string())?;
            let backend = backend.unwrap_or_else(|| cfg.backend.clone());
            if backend != "sim" {
                return Err(format!("backend `{backend}` is not available in this build; use `sim`"));
            }
            let out = run_sim(&cfg, &RunOptions { pcap: pcap.clone(), pcap_fillers })?;
            print_summary(&cfg, &out);
            if let Some(p) = &records {
                record::write(p, &out.records).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
                println!("records: {} ({} frames)", p.display(), out.records.len());
            }
            if let Some(p) = &pcap {
                println!("pcap: {}", p.display());
            }
            if out.timed_out {
                return Err("the run hit run.max_duration; frames still pending were rejected (shutdown)".into());
            }
            Ok(())
        }
        Cmd::Report { records } => {
            let recs = record::read(&records)?;
            print!("{}", report::render(&recs));
            Ok(())
        }
        Cmd::Table3 { span_ms } => {
            let model = table3::default_model();
            let span = Nanos::from_ms(span_ms);
            let cells = table3::table(model, span)?;
            print!("{}", table3::render(model, span, &cells));
            Ok(())
        }
    }
}

fn print_summary(cfg: &Config, out: &keepon::run::RunOutput) {
    let c = &out.counters;
    println!("backend: {}", out.backend);
    println!("timing: {}", out.timing);
    println!(
        "link {} · slot {} B (δ = {}) · ring {} · batch {} · policy {}",
        cfg.geometry.rate(),
        cfg.geometry.slot_bytes(),
        cfg.geometry.period(),
        cfg.ownership.ring(),
        cfg.batch,
        cfg.policy
    );
    println!(
        "frames: {} submitted, {} sent, {} rejected · fillers sent {} · underruns {}",
        c.submitted,
        c.sent,
        c.rejected_total(),
        c.fillers_sent,
        c.underruns
    );
    if let Some(w) = out.wire {
        println!("wire: {} slots, busy {:.4} %, {} gaps", w.slots, w.busy_ppm() as f64 / 1e4, w.gaps);
    }
    let sent: Vec<_> = out.records.iter().filter(|r| r.sent()).collect();
    let exact = sent.iter().filter(|r| r.tx_ns == r.ephc_ns).count();
    let on_schedule = sent.iter().filter(|r| r.txtime_ns.is_some() && r.tx_ns == r.txtime_ns).count();
    let rt = sent.iter().filter(|r| r.txtime_ns.is_some()).count();
    println!(
        "timing: {exact}/{} sent frames left at exactly their EPHC slot time; {on_schedule}/{rt} real-time frames exactly at their txtime",
        sent.len()
    );
    for f in &cfg.flows {
        let mine: Vec<_> = out.records.iter().filter(|r| r.flow == f.name).collect();
        let ok = mine.iter().filter(|r| r.sent()).count();
        let mut gaps: Vec<i64> = mine
            .iter()
            .filter(|r| r.sent())
            .filter_map(|r| r.rx_ns)
            .collect::<Vec<_>>()
            .windows(2)
            .map(|w| w[1] - w[0])
            .collect();
        gaps.sort_unstable();
        let range = match (gaps.first(), gaps.last()) {
            (Some(a), Some(b)) if a == b => format!("all {a} ns apart"),
            (Some(a), Some(b)) => format!("{a}..{b} ns apart"),
            _ => "—".into(),
        };
        println!("  flow {:<12} class {:<8} {ok}/{} sent, received {range}", f.name, f.class_name, mine.len());
    }
}
