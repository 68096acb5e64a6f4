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

use keepon_core::time::Tai;

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
