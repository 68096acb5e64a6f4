//! Per-frame records: one CSV row per frame handed to keepon, written raw and analysed later.
//!
//! Format v4 (first line `# keepon-records v4`, then a header; v3 files, without the last three columns, v2 files,
//! also without `released_ns`, and v1 files, also without `sched_ns` and `off_schedule`, are read too):
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
//! | `sched_ns` | real-time frames: start of the schedule slot that holds `txtime_ns`; `tx_ns − sched_ns` is the deviation |
//! | `off_schedule` | `true` if the frame left further than the tolerance (`run.tolerance`) from `sched_ns` |
//! | `released_ns` | host-paced links: when the host handed the frame to the kernel, on keepon's clock (the kernel's TX timestamp where the backend gets one, else interpolated) — after `ephc_ns` by the release lag, microseconds usually, milliseconds after a host stall; empty where the NIC paces |
//! | `iface` | listener: the interface the frame arrived on (empty for `keepon run`) |
//! | `rtag_seq` | the IEEE 802.1CB R-TAG sequence number, if the frame had one |
//! | `frer` | listener, R-TAGged frames: what sequence recovery did with this copy — `passed`, `discarded` (a copy of a sequence number already passed) or `rogue` (too far from the recovery's history); empty otherwise |
//!
//! Records are written as outcomes arrive ([`RecordWriter`]), in outcome order, so a run's memory does not grow
//! with its length.

use std::io::{BufRead, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

/// First line of a records file.
pub const MAGIC_LINE: &str = "# keepon-records v4";

/// First line of a version 3 records file (still read).
pub const MAGIC_LINE_V3: &str = "# keepon-records v3";

/// First line of a version 2 records file (still read).
pub const MAGIC_LINE_V2: &str = "# keepon-records v2";

/// First line of a version 1 records file (still read).
pub const MAGIC_LINE_V1: &str = "# keepon-records v1";

/// Longest line accepted when reading records (a row is < 300 bytes; this bounds memory on garbage input).
const MAX_LINE: u64 = 64 * 1024;

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
    /// Start of the schedule slot holding the txtime.
    #[serde(default)]
    pub sched_ns: Option<i64>,
    /// Left further than the tolerance from `sched_ns`.
    #[serde(default)]
    pub off_schedule: Option<bool>,
    /// Host-paced links: when the host released the frame to the kernel, on the EPHC.
    #[serde(default)]
    pub released_ns: Option<i64>,
    /// Listener: the interface the frame arrived on.
    #[serde(default)]
    pub iface: String,
    /// The R-TAG sequence number (IEEE 802.1CB), if the frame had one.
    #[serde(default)]
    pub rtag_seq: Option<u16>,
    /// Listener, R-TAGged frames: `passed`, `discarded` or `rogue` (sequence recovery's verdict).
    #[serde(default)]
    pub frer: String,
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
            sched_ns: None,
            off_schedule: None,
            released_ns: None,
            iface: String::new(),
            rtag_seq: None,
            frer: String::new(),
        }
    }

    /// `tx_ns − sched_ns`, if both are known (no overflow: `None` if it does not fit).
    pub fn deviation(&self) -> Option<i64> {
        self.tx_ns?.checked_sub(self.sched_ns?)
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

    /// True for a copy that a listener's sequence recovery discarded (a duplicate or a rogue): not a frame of the
    /// stream delivered, only a copy seen.
    pub fn eliminated(&self) -> bool {
        self.frer == "discarded" || self.frer == "rogue"
    }
}

/// Records written one by one as outcomes arrive.
pub struct RecordWriter {
    w: csv::Writer<std::io::BufWriter<std::fs::File>>,
    rows: u64,
}

impl RecordWriter {
    /// Create (truncate) a records file.
    pub fn create(path: &Path) -> std::io::Result<RecordWriter> {
        let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
        writeln!(f, "{MAGIC_LINE}")?;
        Ok(RecordWriter { w: csv::Writer::from_writer(f), rows: 0 })
    }

    /// Append one record.
    pub fn write(&mut self, r: &Record) -> std::io::Result<()> {
        self.w.serialize(r).map_err(std::io::Error::other)?;
        self.rows += 1;
        Ok(())
    }

    /// Rows written.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Flush to the file.
    pub fn finish(mut self) -> std::io::Result<()> {
        self.w.flush()
    }
}

/// Write records as CSV.
pub fn write(path: &Path, records: &[Record]) -> std::io::Result<()> {
    let mut w = RecordWriter::create(path)?;
    for r in records {
        w.write(r)?;
    }
    w.finish()
}

/// Read records written by [`write`] (or by `keepon listen`). Bounded: a line longer than 64 KiB (no records
/// file has one) is an error, so a non-records file (`/dev/zero`) cannot make it read without end.
pub fn read(path: &Path) -> Result<Vec<Record>, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut reader = std::io::BufReader::new(file);
    let mut first = Vec::new();
    reader.by_ref().take(MAX_LINE).read_until(b'\n', &mut first).map_err(|e| format!("{}: {e}", path.display()))?;
    let first = String::from_utf8_lossy(&first);
    let first = first.trim_end();
    if ![MAGIC_LINE, MAGIC_LINE_V3, MAGIC_LINE_V2, MAGIC_LINE_V1].contains(&first) {
        return Err(format!("{}: not a keepon records file (first line is not `{MAGIC_LINE}`)", path.display()));
    }
    let mut rdr =
        csv::ReaderBuilder::new().flexible(true).from_reader(LineBounded { inner: reader, line: 0, ended: true });
    let headers = rdr.headers().map_err(|e| format!("{}: line 2: {e}", path.display()))?.clone();
    let mut out = Vec::new();
    let mut row = csv::StringRecord::new();
    let mut last_line = 0;
    loop {
        let more = rdr.read_record(&mut row);
        // Line numbers of the file (the magic line is line 1, the header line 2).
        let line = row.position().map_or(rdr.position().line(), csv::Position::line) + 1;
        let bad = |what: String| format!("{}: line {line}: {what}", path.display());
        if !more.map_err(|e| bad(e.to_string()))? {
            break;
        }
        // A row cut short (a writer killed mid-row) has fewer fields, or lacks its end of line if it is the last.
        if row.len() != headers.len() {
            return Err(bad(format!(
                "{} fields where the header has {}: the row is cut or malformed",
                row.len(),
                headers.len()
            )));
        }
        let r: Record = row.deserialize(Some(&headers)).map_err(|e| bad(e.to_string()))?;
        if r.outcome != "sent" && r.outcome != "rejected" {
            return Err(bad(format!("outcome `{}` is neither `sent` nor `rejected`", r.outcome)));
        }
        out.push(r);
        last_line = line;
    }
    // The writer ends every row with a newline: a last row without one was cut while it was written.
    if !out.is_empty() && !rdr.get_ref().ended {
        return Err(format!(
            "{}: line {last_line}: the last row has no end of line: the file was cut while it was written",
            path.display()
        ));
    }
    Ok(out)
}

/// A reader that fails on a line longer than [`MAX_LINE`].
struct LineBounded<R> {
    inner: R,
    line: u64,
    /// The last byte read was a newline (or nothing was read).
    ended: bool,
}

impl<R: std::io::Read> std::io::Read for LineBounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(&b) = buf[..n].last() {
            self.ended = b == b'\n';
        }
        for &b in &buf[..n] {
            self.line = if b == b'\n' { 0 } else { self.line + 1 };
            if self.line > MAX_LINE {
                return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "a line longer than 64 KiB"));
            }
        }
        Ok(n)
    }
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
                sched_ns: Some(10),
                off_schedule: Some(false),
                released_ns: Some(12_345),
                iface: "kp1".into(),
                rtag_seq: Some(65_535),
                frer: "discarded".into(),
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
                sched_ns: None,
                off_schedule: None,
                released_ns: None,
                iface: String::new(),
                rtag_seq: None,
                frer: String::new(),
            },
        ];
        write(&p, &recs).unwrap();
        assert_eq!(read(&p).unwrap(), recs);
        std::fs::write(&p, "seq,flow\n1,a\n").unwrap();
        assert!(read(&p).unwrap_err().contains("not a keepon records file"));
        // Version 1 files (without the last two columns) still read.
        let v1 = "# keepon-records v1\nseq,flow,class,txtime_ns,outcome,reason,slot,ring_slot,ephc_ns,tx_ns,rx_ns\n\
                  3,a,tc-0,10,sent,,3,3,10,10,8\n";
        std::fs::write(&p, v1).unwrap();
        assert_eq!(read(&p).unwrap()[0].rx_ns, Some(8));
        // And version 2 files (without `released_ns`).
        let v2 = "# keepon-records v2\nseq,flow,class,txtime_ns,outcome,reason,slot,ring_slot,ephc_ns,tx_ns,rx_ns,\
                  sched_ns,off_schedule\n3,a,tc-0,10,sent,,3,3,10,10,8,10,false\n";
        std::fs::write(&p, v2).unwrap();
        let r = &read(&p).unwrap()[0];
        assert_eq!((r.off_schedule, r.released_ns), (Some(false), None));
        // And version 3 files (without `iface`, `rtag_seq`, `frer`).
        let v3 = "# keepon-records v3\nseq,flow,class,txtime_ns,outcome,reason,slot,ring_slot,ephc_ns,tx_ns,rx_ns,\
                  sched_ns,off_schedule,released_ns\n3,a,tc-0,10,sent,,3,3,10,10,8,10,false,12\n";
        std::fs::write(&p, v3).unwrap();
        let r = &read(&p).unwrap()[0];
        assert_eq!((r.released_ns, r.rtag_seq, r.iface.as_str(), r.eliminated()), (Some(12), None, "", false));
    }

    /// A file cut while it was written (a writer killed mid-row), or a row edited into another shape, is refused
    /// naming its line, never read as a record with wrong values.
    #[test]
    fn cut_and_malformed_rows_are_refused_naming_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.csv");
        let mut r = Record::new(7, "a", "tc-0", Some(1_700_000_000_123_456_789));
        r.sent_at(3, 3, 1_700_000_000_123_456_789);
        r.rx_ns = Some(1_700_000_000_123_460_000);
        r.released_ns = Some(1_700_000_000_123_450_000);
        (r.iface, r.rtag_seq, r.frer) = ("kp1".into(), Some(7), "passed".into());
        write(&p, &[r.clone(), r.clone()]).unwrap();
        let whole = std::fs::read_to_string(&p).unwrap();
        assert_eq!(read(&p).unwrap().len(), 2);
        // Cut inside the last number of the last row: every field is there, but the end of line is not.
        std::fs::write(&p, &whole[..whole.len() - 5]).unwrap();
        let e = read(&p).unwrap_err();
        assert!(e.contains("line 4") && e.contains("no end of line"), "{e}");
        // Cut mid-row: fewer fields.
        let cut = whole.len() - 40;
        std::fs::write(&p, &whole[..cut]).unwrap();
        let e = read(&p).unwrap_err();
        assert!(e.contains("line 4") && e.contains("fields"), "{e}");
        // A row with an outcome that is not one.
        std::fs::write(&p, whole.replacen(",sent,", ",se,", 1)).unwrap();
        let e = read(&p).unwrap_err();
        assert!(e.contains("line 3") && e.contains("`se`"), "{e}");
        // A number that is not one.
        std::fs::write(&p, whole.replacen(",3,3,", ",3,x,", 1)).unwrap();
        let e = read(&p).unwrap_err();
        assert!(e.contains("line 3"), "{e}");
    }

    /// Reading is bounded: an endless file without line breaks is refused, not read into memory.
    #[test]
    fn endless_input_is_refused() {
        let e = read(Path::new("/dev/zero")).unwrap_err();
        assert!(e.contains("not a keepon records file"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("long.csv");
        let mut text = format!("{MAGIC_LINE}\nseq,flow\n");
        text.push_str(&"x".repeat(200_000));
        std::fs::write(&p, text).unwrap();
        assert!(read(&p).is_err());
    }
}
