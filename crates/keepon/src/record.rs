//! Per-frame records: one CSV row per frame handed to keepon, written raw and analysed later.
//!
//! Format v1 (first line `# keepon-records v1`, then a header):
//!
//! | column | meaning |
//! |---|---|
//! | `seq` | instance number within the flow |
//! | `flow`, `class` | names from the configuration |
//! | `txtime_ns` | scheduled transmission time, TAI ns (empty for best effort) |
//! | `outcome` | `sent` or `rejected` |
//! | `reason` | why rejected (empty if sent) |
//! | `slot` | EPHC slot count the frame left in |
//! | `ring_slot` | ownership-map ring slot it occupied |
//! | `ephc_ns` | the slot's start time on keepon's clock (what the application was told) |
//! | `tx_ns` | wire start time (simulator: the simulated wire; real NICs: the EPHC time) |
//! | `rx_ns` | receiver timestamp (simulator: quantised like an i210; listener: kernel/NIC RX timestamp) |

use std::io::{BufRead, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

/// First line of a records file.
pub const MAGIC_LINE: &str = "# keepon-records v1";

/// One frame's record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Instance number within the flow.
    pub seq: u64,
    /// Flow name.
    pub flow: String,
    /// Class name.
    pub class: String,
    /// Scheduled time (TAI ns).
    pub txtime_ns: Option<i64>,
    /// `sent` or `rejected`.
    pub outcome: String,
    /// Rejection reason.
    pub reason: String,
    /// EPHC slot count.
    pub slot: Option<u64>,
    /// Ownership-map ring slot.
    pub ring_slot: Option<u32>,
    /// Slot start on the EPHC.
    pub ephc_ns: Option<i64>,
    /// Wire start.
    pub tx_ns: Option<i64>,
    /// Receiver timestamp.
    pub rx_ns: Option<i64>,
}

impl Record {
    /// A record of a frame with no outcome yet (it reads `rejected` with an empty reason until one of
    /// [`Record::sent_at`] or [`Record::rejected`] fills it in).
    pub fn new(seq: u64, flow: &str, class: &str, txtime_ns: Option<i64>) -> Record {
        Record {
            seq,
            flow: flow.into(),
            class: class.into(),
            txtime_ns,
            outcome: "rejected".into(),
            reason: String::new(),
            slot: None,
            ring_slot: None,
            ephc_ns: None,
            tx_ns: None,
            rx_ns: None,
        }
    }

    /// The frame left in `slot` (ownership ring slot `ring_slot`) at EPHC time `time`.
    pub fn sent_at(&mut self, slot: u64, ring_slot: u32, time: i64) {
        self.outcome = "sent".into();
        self.reason.clear();
        self.slot = Some(slot);
        self.ring_slot = Some(ring_slot);
        self.ephc_ns = Some(time);
        self.tx_ns = Some(time);
    }

    /// The frame was rejected.
    pub fn rejected(&mut self, reason: &str) {
        self.outcome = "rejected".into();
        self.reason = reason.into();
    }

    /// True if the frame was sent.
    pub fn sent(&self) -> bool {
        self.outcome == "sent"
    }
}

/// Write records as CSV.
pub fn write(path: &Path, records: &[Record]) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(f, "{MAGIC_LINE}")?;
    let mut w = csv::Writer::from_writer(f);
    for r in records {
        w.serialize(r).map_err(std::io::Error::other)?;
    }
    w.flush()
}

/// Read records written by [`write`] (or by `keepon listen`).
pub fn read(path: &Path) -> Result<Vec<Record>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut reader = std::io::BufReader::new(file);
    let mut first = String::new();
    reader.read_line(&mut first).map_err(|e| format!("{}: {e}", path.display()))?;
    if first.trim_end() != MAGIC_LINE {
        return Err(format!("{}: not a keepon records file (first line is not `{MAGIC_LINE}`)", path.display()));
    }
    let mut rdr = csv::Reader::from_reader(reader);
    let mut out = Vec::new();
    for (i, row) in rdr.deserialize().enumerate() {
        let r: Record = row.map_err(|e| format!("{}: row {}: {e}", path.display(), i + 1))?;
        out.push(r);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.csv");
        let recs = vec![
            Record {
                seq: 0,
                flow: "a".into(),
                class: "tc-0".into(),
                txtime_ns: Some(10),
                outcome: "sent".into(),
                reason: String::new(),
                slot: Some(3),
                ring_slot: Some(3),
                ephc_ns: Some(10),
                tx_ns: Some(10),
                rx_ns: Some(8),
            },
            Record {
                seq: 1,
                flow: "a".into(),
                class: "tc-0".into(),
                txtime_ns: None,
                outcome: "rejected".into(),
                reason: "late".into(),
                slot: None,
                ring_slot: None,
                ephc_ns: None,
                tx_ns: None,
                rx_ns: None,
            },
        ];
        write(&p, &recs).unwrap();
        assert_eq!(read(&p).unwrap(), recs);
        std::fs::write(&p, "seq,flow\n1,a\n").unwrap();
        assert!(read(&p).unwrap_err().contains("not a keepon records file"));
    }
}
