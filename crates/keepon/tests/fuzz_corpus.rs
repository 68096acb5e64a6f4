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

/// The station check on seeded random operation sequences, both timings (the first byte's bit 1) and both
/// policies: beyond the saved corpus, every run of the suite tries new ones (4 000 sequences of up to 48
/// operations; the seed in a failure's message reproduces it).
#[test]
fn station_on_random_operations() {
    let mut x = 0x2545_f491_4f6c_dd1du64 ^ std::process::id() as u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..4000u64 {
        let seed = next();
        let mut y = seed;
        let ops = 1 + (seed % 48) as usize;
        let mut data = vec![(i % 4) as u8];
        for _ in 0..ops * 11 {
            y = y.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            data.push((y >> 56) as u8);
        }
        // Small times most of the time: an 8-byte value with its top six bytes cleared now and then.
        for op in data[1..].chunks_exact_mut(11) {
            if op[10] & 3 != 0 {
                let sign = if op[8] & 0x80 != 0 { 0xff } else { 0 };
                op[3..9].fill(sign);
            }
        }
        let r = std::panic::catch_unwind(|| keepon::fuzzing::station(&data));
        assert!(r.is_ok(), "station check failed on sequence {i} (seed {seed:#x}): {data:?}");
    }
}
