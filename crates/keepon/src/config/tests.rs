//! The configuration's checks, each naming its key.

use super::*;

const EXAMPLE2: &str = r#"
    [link]
    rate = "1Gbps"
    [ring]
    slot_bytes = 1230
    slots = 32
    batch = 8
    slot_masks = "0x01,0x20002,0"
    [[flow]]
    name = "a"
    class = "tc-0"
    period = "320us"
    frame_bytes = 100
    count = 10
"#;

#[test]
fn durations_and_rates_parse_exactly() {
    assert_eq!(parse_duration("320us"), Ok(Nanos(320_000)));
    assert_eq!(parse_duration("1.5us"), Ok(Nanos(1_500)));
    assert_eq!(parse_duration("10 ms"), Ok(Nanos(10_000_000)));
    assert_eq!(parse_duration("250"), Ok(Nanos(250)));
    assert_eq!(parse_duration("2µs"), Ok(Nanos(2_000)));
    assert!(parse_duration("1.5ns").is_err());
    assert!(parse_duration("3 weeks").is_err());
    assert_eq!(parse_rate("2.5Gbps"), Ok(2_500_000_000));
    assert_eq!(parse_rate("100Mbps"), Ok(100_000_000));
    assert!(parse_rate("fast").is_err());
}

#[test]
fn example2_validates() {
    let c = Config::parse(EXAMPLE2).unwrap();
    assert_eq!(c.ownership.owned(keepon_core::isolation::ClassId(1)), &[1, 17]);
    assert!(c.ownership.is_best_effort(keepon_core::isolation::ClassId(2)));
    assert_eq!(c.flows[0].spec.lead, Nanos::from_us(150));
}

const WINDOWED: &str = r#"
    [link]
    rate = "1Gbps"
    timing = "bytes"
    [ring]
    slot_bytes = 1230
    slots = 32
    batch = 8
    [schedule]
    cycle_time = "250us"
    [[class]]
    name = "ctrl"
    windows = [["0us", "5us"], ["125us", "5us"]]
    [[class]]
    name = "be"
    [[flow]]
    name = "a"
    class = "ctrl"
    period = "125us"
    frame_bytes = 1518
    count = 10
"#;

/// `[[class]] windows`: the byte clock's classes as time, with their cycle; every bad list refused naming
/// what is wrong.
#[test]
fn class_windows_validate_and_bad_ones_are_refused() {
    let c = Config::parse(WINDOWED).unwrap();
    let w = c.windows.as_ref().unwrap();
    assert!(
        !w.is_best_effort(keepon_core::isolation::ClassId(0)) && w.is_best_effort(keepon_core::isolation::ClassId(1))
    );
    assert!(!c.flows[0].spec.is_best_effort(), "a windowed class is real-time");
    let bad = |from: &str, to: &str| Config::parse(&WINDOWED.replace(from, to)).unwrap_err().0;
    let e = bad("[\"125us\", \"5us\"]", "[\"3us\", \"5us\"]");
    assert!(e.contains("class windows") && e.contains("overlaps"), "{e}");
    let e = bad("[\"125us\", \"5us\"]", "[\"248us\", \"5us\"]");
    assert!(e.contains("exceeds the cycle of 250000 ns"), "{e}");
    let e = bad("[\"125us\", \"5us\"]", "[\"125us\", \"600ns\"]");
    assert!(e.contains("shorter than a minimum frame") && e.contains("672 ns"), "{e}");
    let e = bad("timing = \"bytes\"", "");
    assert!(e.contains("class[0] (`ctrl`).windows needs link.timing = \"bytes\""), "{e}");
    let e = bad("cycle_time = \"250us\"", "");
    assert!(e.contains("schedule.cycle_time is required"), "{e}");
    let e = bad("name = \"ctrl\"", "name = \"ctrl\"\nslots = [1]");
    assert!(e.contains("give windows, or mask or slots"), "{e}");
    let e = bad("frame_bytes = 1518", "frame_bytes = 1519");
    assert!(e.contains("frame_bytes = 1519") && e.contains("link.max_frame"), "{e}");
}

#[test]
fn errors_name_the_key() {
    let e = Config::parse(&EXAMPLE2.replace("batch = 8", "batch = 32")).unwrap_err();
    assert!(e.0.contains("ring.batch = 32"), "{e}");
    let e = Config::parse(&EXAMPLE2.replace("count = 10", "count = 10\nperiode = 3")).unwrap_err();
    assert!(e.0.contains("periode"), "{e}");
    let e = Config::parse(&EXAMPLE2.replace("0x01,0x20002", "0x03,0x20002")).unwrap_err();
    assert!(e.0.contains("both own ring slot 1"), "{e}");
    let e = Config::parse(&EXAMPLE2.replace("\"320us\"", "\"320 fortnights\"")).unwrap_err();
    assert!(e.0.contains("unknown unit"), "{e}");
    let e = Config::parse(&EXAMPLE2.replace("class = \"tc-0\"", "class = \"tc-9\"")).unwrap_err();
    assert!(e.0.contains("flow[0] (`a`).class"), "{e}");
    let e = Config::parse(&EXAMPLE2.replace("frame_bytes = 100", "frame_bytes = 2000")).unwrap_err();
    assert!(e.0.contains("frame_bytes = 2000"), "{e}");
    // `rtag` (802.1CB FRER) on a real-time flow; refused on a best-effort one, naming the key.
    let be = "[[flow]]\nname = \"bulk\"\nclass = \"tc-2\"\nperiod = \"1ms\"\nframe_bytes = 100\ncount = 1\n";
    let c = Config::parse(&format!("{}{be}", EXAMPLE2.replace("count = 10", "count = 10\nrtag = true"))).unwrap();
    assert!(c.flows[0].spec.rtag && !c.flows[1].spec.rtag);
    let e = Config::parse(&format!("{EXAMPLE2}{be}rtag = true\n")).unwrap_err();
    assert!(e.0.contains("flow[1] (`bulk`).rtag") && e.0.contains("best effort"), "{e}");
    let e = Config::parse(&EXAMPLE2.replace("count = 10", "count = 10\nrtag = 1")).unwrap_err();
    assert!(e.0.contains("rtag"), "{e}");
    let e = Config::parse(&EXAMPLE2.replace("rate = \"1Gbps\"", "rate = \"1.5Kbps\"")).unwrap_err();
    assert!(e.0.contains("link.rate"), "{e}");
    assert!(Config::parse("this is not toml").is_err());
    for b in BACKENDS {
        let c = Config::parse(&format!("{EXAMPLE2}\n[run]\nbackend = \"{b}\"")).unwrap();
        assert_eq!(c.backend, b, "every --backend name is a valid run.backend");
    }
    let e = Config::parse(&format!("{EXAMPLE2}\n[run]\nbackend = \"dpdk\"")).unwrap_err();
    assert!(e.0.contains("run.backend") && e.0.contains("afpacket-ring"), "{e}");
    // The emulated oscillator error (tests only): ppm to ppb, bounds name the key.
    let emu = |extra: &str| Config::parse(&EXAMPLE2.replace("rate = \"1Gbps\"", &format!("rate = \"1Gbps\"\n{extra}")));
    assert_eq!(Config::parse(EXAMPLE2).unwrap().emulation, None);
    let c = emu("emulated_offset = \"-1s\"\nemulated_ppm = 50.0").unwrap();
    let e = |offset, ppb, step| Some(EmulatedError { offset: Nanos(offset), ppb, step });
    assert_eq!(c.emulation, e(-1_000_000_000, 50_000, None));
    assert_eq!(emu("emulated_ppm = -0.25").unwrap().emulation, e(0, -250, None));
    let s = emu("emulated_step = \"10us\"\nemulated_step_after = \"40s\"").unwrap();
    assert_eq!(s.emulation, e(0, 0, Some((Nanos::from_ms(40_000), Nanos::from_us(10)))));
    assert!(emu("emulated_step = \"10us\"").unwrap_err().0.contains("go together"));
    assert!(emu("emulated_step = \"2s\"\nemulated_step_after = \"1s\"").unwrap_err().0.contains("±1 s"));
    assert!(emu("emulated_ppm = 2000.0").unwrap_err().0.contains("link.emulated_ppm"));
    assert!(emu("emulated_offset = \"2000s\"").unwrap_err().0.contains("link.emulated_offset"));
}

/// `[schedule]` and `link.max_frame`: defaults, and bad values refused before the link comes up, naming the key;
/// with `[ptp]`, a slot that leaves fillers no room to absorb ±100 ppm is refused too.
#[test]
fn the_schedule_is_checked_naming_the_key() {
    let c = Config::parse(EXAMPLE2).unwrap();
    assert_eq!((c.base_time, c.max_frame), (Tai(0), 1518));
    let with = |s: &str| Config::parse(&format!("{EXAMPLE2}\n[schedule]\n{s}"));
    assert_eq!(with("base_time = 1_700_000_000_000_000_000").unwrap().base_time.0, 1_700_000_000_000_000_000);
    assert!(with("cycle_time = \"320us\"").is_ok());
    let e = with("base_time = -1").unwrap_err();
    assert!(e.0.contains("schedule.base_time = -1"), "{e}");
    let e = with("base_time = 4611686018427387904").unwrap_err();
    assert!(e.0.contains("schedule.base_time"), "{e}");
    let e = with("cycle_time = \"321us\"").unwrap_err();
    assert!(e.0.contains("schedule.cycle_time") && e.0.contains("not a whole number of slots"), "{e}");
    let e = with("cycle_time = \"640us\"").unwrap_err();
    assert!(e.0.contains("schedule.cycle_time") && e.0.contains("64 slots"), "{e}");
    let e = with("cycle = 3").unwrap_err();
    assert!(e.0.contains("cycle"), "{e}");
    let e = Config::parse(&EXAMPLE2.replace("rate = \"1Gbps\"", "rate = \"1Gbps\"\nmax_frame = 100")).unwrap_err();
    assert!(e.0.contains("link.max_frame = 100"), "{e}");
    // With [ptp]: 1518-byte slots on a 1518-byte link cannot absorb a fast oscillator; 1517-byte ones can.
    let ptp = |slot: u32, max: &str| {
        let t = EXAMPLE2.replace("slot_bytes = 1230", &format!("slot_bytes = {slot}"));
        let t = t.replace("rate = \"1Gbps\"", &format!("rate = \"1Gbps\"\n{max}"));
        let c = Config::parse(&format!("{t}\n[ptp]\nclass = \"tc-0\"\n")).unwrap();
        crate::ptpconf::PtpConfig::from_config(&c).map(|_| ())
    };
    let e = ptp(1518, "").unwrap_err();
    assert!(e.0.contains("ring.slot_bytes = 1518") && e.0.contains("link.max_frame"), "{e}");
    assert!(ptp(1517, "").is_ok());
    assert!(ptp(1518, "max_frame = 9018").is_ok());
}

/// Values that would overflow, hang or be meaningless later are refused up front, naming the key.
#[test]
fn values_beyond_what_a_run_can_represent_are_refused() {
    let max = i64::MAX;
    let cases: Vec<(String, &str)> = vec![
        (EXAMPLE2.replace("count = 10", &format!("count = 10\noffset = {max}")), "offset"),
        (EXAMPLE2.replace("\"320us\"", &max.to_string()), "period"),
        (EXAMPLE2.replace("count = 10", "count = 100000000000000"), "last instance"),
        (EXAMPLE2.replace("count = 10", &format!("count = 10\nlead = {max}")), "lead"),
        (EXAMPLE2.replace("count = 10", "count = 10\nlead = -5"), "lead"),
        (format!("{EXAMPLE2}\n[run]\nstart = {max}"), "run.start"),
        (format!("{EXAMPLE2}\n[run]\nstart = -1"), "run.start"),
        (format!("{EXAMPLE2}\n[run]\npoll_period = {max}"), "run.poll_period"),
        (format!("{EXAMPLE2}\n[sim]\npoll_period = \"1000s\""), "sim.poll_period"),
        (format!("{EXAMPLE2}\n[sim]\nt0 = {}", i64::MIN), "sim.t0"),
        (format!("{EXAMPLE2}\n[sim]\nt0 = {max}"), "sim.t0"),
        (format!("{EXAMPLE2}\n[sim]\nt0 = -1"), "sim.t0"),
        (format!("{EXAMPLE2}\n[sim]\njitter = {max}"), "sim.jitter"),
        (format!("{EXAMPLE2}\n[run]\nmax_pending = 0"), "run.max_pending"),
        (format!("{EXAMPLE2}\n[run]\nmax_advance = 0"), "run.max_advance"),
        (format!("{EXAMPLE2}\n[run]\nmax_advance = -3"), "run.max_advance"),
        (format!("{EXAMPLE2}\n[run]\nmax_duration = {max}"), "run.max_duration"),
        (EXAMPLE2.replace("\"320us\"", "320.5"), "whole number of nanoseconds"),
        (EXAMPLE2.replace("rate = \"1Gbps\"", "rate = 1.5e9"), "whole number of b/s"),
        (
            EXAMPLE2
                .replace("slot_masks = \"0x01,0x20002,0\"", "")
                .replace("[[flow]]", "[[class]]\nname = \"tc-0\"\nslots = [0, 3, 0]\n[[flow]]"),
            "lists ring slot 0 twice",
        ),
    ];
    for (text, key) in cases {
        match Config::parse(&text) {
            Ok(_) => panic!("accepted; expected an error naming {key}:\n{text}"),
            Err(e) => assert!(e.0.contains(key), "error does not name {key}: {e}"),
        }
    }
}
