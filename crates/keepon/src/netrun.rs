//! `keepon run` with `[ptp]`: the configuration's flows on network time, in one process.
//!
//! Network time is what `keepon daemon` serves (the PTP port, the sync gate, `Time`), and `keepon talk` is how
//! flows are replayed on it (wait until synchronised, read the EPHC's offset, schedule every frame in network
//! time, one outcome per frame). A run on network time is exactly those two, composed: the daemon's loop runs
//! on this thread with a private socket (mode 0600, in a fresh directory of its own), the talker on another,
//! and the run ends when the talker has every outcome. So `run` and `daemon` + `talk` can never disagree about
//! what synchronised means, and a station that does not synchronise within the wait never sends a scheduled
//! frame: the run fails with the servo's state instead.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use keepon_nic::Nic;

use crate::config::Config;
use crate::daemon::{serve_with, DaemonConfig, DaemonStats, PtpLink};
use crate::talk::{talk, TalkOutput};

/// How long the private socket may take to appear.
const SOCKET_WAIT: Duration = Duration::from_secs(10);

/// A directory only this process uses, removed when dropped.
struct PrivateDir(PathBuf);

impl PrivateDir {
    fn create() -> Result<PrivateDir, String> {
        use std::os::unix::fs::DirBuilderExt;
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let p = std::env::temp_dir().join(format!("keepon-run-{}-{nanos}", std::process::id()));
        std::fs::DirBuilder::new().mode(0o700).create(&p).map_err(|e| format!("cannot create {}: {e}", p.display()))?;
        Ok(PrivateDir(p))
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What a run on network time produced.
#[derive(Debug)]
pub struct NetRunOutput {
    /// The talker's records and counts.
    pub talk: TalkOutput,
    /// The station's side.
    pub daemon: DaemonStats,
}

/// Run `cfg`'s flows on network time over `nic` (with `link` for PTP on a real interface): wait at most
/// `sync_wait` for synchronisation, then `grace` for the last outcomes; records go to `records` as outcomes
/// arrive, the wire to `pcap` (each slot at its EPHC time: network time once synchronised). `stop` (a signal)
/// ends it early; the frames already submitted still get their outcomes.
#[allow(clippy::too_many_arguments)]
pub fn run_on_network_time<N: Nic>(
    cfg: &Config,
    nic: N,
    link: Option<PtpLink>,
    sync_wait: Duration,
    grace: Duration,
    records: Option<&Path>,
    pcap: Option<&Path>,
    stop: &'static AtomicBool,
) -> Result<NetRunOutput, String> {
    let dir = PrivateDir::create()?;
    let socket = dir.0.join("keepon.sock");
    let mut dcfg = DaemonConfig::private(cfg, socket.clone()).map_err(|e| e.to_string())?;
    dcfg.pcap = pcap.map(Path::to_path_buf);
    std::thread::scope(|s| {
        let talker = s.spawn(|| {
            let up = Instant::now();
            let r = loop {
                // The socket file appears at bind(), a moment before listen(): until then a connect is refused.
                if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
                    break talk(cfg, &socket, grace, sync_wait, records, stop);
                }
                if stop.load(Ordering::Relaxed) || up.elapsed() > SOCKET_WAIT {
                    break Err("the station did not come up".to_string());
                }
                std::thread::sleep(Duration::from_millis(10));
            };
            stop.store(true, Ordering::Relaxed);
            r
        });
        let served = serve_with(cfg, &dcfg, nic, link, stop, None);
        // The station ended (on its own only by an error): the talker must not wait for it.
        stop.store(true, Ordering::Relaxed);
        let talked = talker.join().map_err(|_| "the talker panicked".to_string())?;
        let daemon = served?;
        Ok(NetRunOutput { talk: talked?, daemon })
    })
}
