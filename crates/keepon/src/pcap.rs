//! The wire as a nanosecond pcap (Ethernet link type, frames without FCS).
//!
//! Timestamps are wire start times on the TAI timescale (pcap readers show them as if UTC; TAI is 37 s ahead
//! of UTC in 2026). Fillers, when written, carry the reserved group address `01-80-C2-00-00-04` and EtherType
//! `0x88B5` with a zero payload, so `eth.dst == 01:80:c2:00:00:04` selects or hides them.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, TsResolution};

use keepon_core::testframe::ETHERTYPE_LOCAL_EXPERIMENTAL;
use keepon_core::time::Tai;
use keepon_nic::WireEvent;

use crate::config::{Config, WireTiming};

/// A pcap file being written.
pub struct PcapOut {
    w: PcapWriter<BufWriter<File>>,
}

impl PcapOut {
    /// Create (truncate) a nanosecond-resolution Ethernet pcap.
    pub fn create(path: &Path) -> std::io::Result<PcapOut> {
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::NanoSecond,
            ..PcapHeader::default()
        };
        let w = PcapWriter::with_header(BufWriter::new(File::create(path)?), header).map_err(std::io::Error::other)?;
        Ok(PcapOut { w })
    }

    /// Append one frame that started on the wire at `t`.
    pub fn write(&mut self, t: Tai, bytes: &[u8]) -> std::io::Result<()> {
        let ts = Duration::from_nanos(u64::try_from(t.0).unwrap_or(0));
        let pkt = PcapPacket::new(ts, bytes.len() as u32, bytes);
        self.w.write_packet(&pkt).map(|_| ()).map_err(std::io::Error::other)
    }

    /// Flush everything to the file.
    pub fn finish(self) -> std::io::Result<()> {
        use std::io::Write;
        self.w.into_writer().flush()
    }
}

/// The wire as a run or a daemon sees it, into a pcap: every slot that left (fillers too where the backend reports
/// them) at the time the caller gives — the true wire time on the simulator (`keepon run`), or the slot's EPHC
/// time, network time once synchronised (`keepon run` with `[ptp]`). Slots pad each frame to the slot on the wire;
/// the byte clock sends it as long as it is. The first write error is kept; the rest of the run goes on.
pub struct WireTap {
    out: PcapOut,
    /// A frame's length on the wire without FCS: the slot's (0 on the byte clock: its own).
    data_len: usize,
    error: Option<String>,
}

impl WireTap {
    /// A tap writing to `path` for a run of `cfg`.
    pub fn create(path: &Path, cfg: &Config) -> Result<WireTap, String> {
        let out = PcapOut::create(path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        let data_len = match cfg.timing {
            WireTiming::Slots => cfg.geometry.slot_bytes() as usize - 4,
            WireTiming::Bytes => 0,
        };
        Ok(WireTap { out, data_len, error: None })
    }

    /// Write slot `w`, which started at `at`.
    pub fn wire(&mut self, w: &WireEvent, at: Tai) {
        if self.error.is_some() {
            return;
        }
        let bytes = match (&w.frame, &w.bytes) {
            (Some(_), Some(b)) => {
                let mut padded = b.clone();
                padded.resize(self.data_len.max(b.len()), 0);
                padded
            }
            // Fillers as long as they were sent (the station sizes them to keep the wire on schedule).
            (None, Some(b)) => filler_bytes(b.len()),
            _ => filler_bytes(self.data_len),
        };
        if let Err(e) = self.out.write(at, &bytes) {
            self.error = Some(format!("writing the pcap failed during the run (the records are complete): {e}"));
        }
    }

    /// Flush; the first error of the run, if any.
    pub fn finish(self) -> Result<(), String> {
        let flushed = self.out.finish();
        match self.error {
            Some(e) => Err(e),
            None => flushed.map_err(|e| format!("writing the pcap failed (the records are complete): {e}")),
        }
    }
}

/// Filler bytes as they appear in a pcap: reserved group address, local experimental EtherType, zeros.
pub fn filler_bytes(len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len.max(14)];
    b[..6].copy_from_slice(&[0x01, 0x80, 0xC2, 0x00, 0x00, 0x04]);
    b[12..14].copy_from_slice(&ETHERTYPE_LOCAL_EXPERIMENTAL.to_be_bytes());
    b
}
