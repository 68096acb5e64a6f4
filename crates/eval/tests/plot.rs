//! `keepon report --plot`'s plotting call, with the repository's Python environment when it exists.

use std::path::PathBuf;

use keepon_eval::plot;

fn venv_python() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../python/.venv/bin/python");
    p.exists().then_some(p)
}

#[test]
fn a_records_file_is_plotted_and_failures_say_why() {
    let dir = std::env::temp_dir().join(format!("keepon-eval-plot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let rec = dir.join("r.csv");
    let mut text = String::from(
        "# keepon-records v2\nseq,flow,class,txtime_ns,outcome,reason,slot,ring_slot,ephc_ns,tx_ns,rx_ns,sched_ns,off_schedule\n",
    );
    for s in 0..40i64 {
        let t = 1_000_000 + s * 320_000;
        text.push_str(&format!("{s},tc0,tc-0,{t},sent,,{s},0,{t},{t},{},{t},false\n", t + 8 * (s % 2)));
    }
    std::fs::write(&rec, text).expect("write records");
    let missing = plot::records("/nonexistent/python", &rec, &dir).unwrap_err();
    assert!(missing.contains("KEEPON_PYTHON"), "{missing}");
    let Some(py) = venv_python() else {
        eprintln!("skipped: no python/.venv (run `make py-env`)");
        return;
    };
    let py = py.to_string_lossy().into_owned();
    let printed = plot::records(&py, &rec, &dir.join("plots")).expect("plots");
    assert!(printed.contains("records-interarrival.png") && printed.contains("records-deviation.png"), "{printed}");
    assert!(dir.join("plots/records-deviation.png").metadata().expect("png").len() > 0);
    let bad = dir.join("bad.csv");
    std::fs::write(&bad, "seq,flow\n1,a\n").expect("write");
    let e = plot::records(&py, &bad, &dir).unwrap_err();
    assert!(e.contains("not a keepon records file"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
