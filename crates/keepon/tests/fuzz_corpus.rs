//! Every saved input of the fuzz corpora (`fuzz/corpus/TARGET/`) replayed through the same checks the fuzz
//! targets run (`keepon::fuzzing`), on the stable toolchain with overflow checks on: what the fuzzer once found
//! or covered stays covered.

use std::path::Path;

fn replay(target: &str, check: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.unwrap().path();
        let data = std::fs::read(&p).unwrap();
        let r = std::panic::catch_unwind(|| check(&data));
        assert!(r.is_ok(), "{target}: corpus input {} fails its check", p.display());
        n += 1;
    }
    assert!(n > 0, "{target}: empty corpus");
}

#[test]
fn protocol_corpus() {
    replay("protocol", keepon::fuzzing::protocol);
}

#[test]
fn config_corpus() {
    replay("config", keepon::fuzzing::config);
}

#[test]
fn frame_corpus() {
    replay("frame", keepon::fuzzing::frame);
}

#[test]
fn station_corpus() {
    replay("station", keepon::fuzzing::station);
}

#[test]
fn ptp_corpus() {
    replay("ptp", keepon::fuzzing::ptp);
}
