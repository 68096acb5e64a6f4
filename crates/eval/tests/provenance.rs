//! Every report labels how its numbers were obtained, reports its sensitivity, and honours `--seed`: on small
//! instances of every experiment `keepon eval` knows.

use std::fs;
use std::path::{Path, PathBuf};

use keepon_eval::cli::{run, EvalOptions, EXPERIMENTS};

/// Experiments without random draws: they refuse `--seed`.
const DETERMINISTIC: [&str; 2] = ["fig19", "table3"];

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("keepon-eval-provenance-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    d
}

/// Small enough for a debug build: frames per cell, ms per point or hyperperiods.
fn small(name: &str) -> u64 {
    match name {
        "fig19" | "table3" => 2,
        "casestudy" => 30,
        _ => 60,
    }
}

fn read(dir: &Path, file: &str) -> String {
    fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{}: {e}", dir.join(file).display()))
}

#[test]
fn every_report_labels_its_numbers_and_changing_the_seed_changes_every_stochastic_result() {
    for name in EXPERIMENTS {
        let a = tmp(&format!("{name}-a"));
        let deterministic = DETERMINISTIC.contains(&name);
        let seed = if deterministic { None } else { Some(1) };
        let summary = run(name, &a, &EvalOptions { frames: Some(small(name)), seed }).expect(name);
        assert_eq!(summary, read(&a, &format!("{name}-summary.md")), "{name}: the summary is what was written");
        // Every table carries the label column, and every row's label starts with one of the four words.
        let lines: Vec<&str> = summary.lines().collect();
        let mut tables = 0;
        for (i, h) in lines.iter().enumerate() {
            if !lines.get(i + 1).is_some_and(|l| l.starts_with("|-")) {
                continue;
            }
            tables += 1;
            let cells = |l: &str| l.trim_matches('|').split('|').map(str::trim).map(String::from).collect::<Vec<_>>();
            let cols: Vec<usize> =
                cells(h).iter().enumerate().filter(|(_, c)| c.starts_with("how obtained")).map(|(k, _)| k).collect();
            assert!(!cols.is_empty(), "{name}: a table without the label column: {h}");
            for row in lines[i + 2..].iter().take_while(|l| l.starts_with('|')) {
                let c = cells(row);
                assert_eq!(c.len(), cells(h).len(), "{name}: row shape: {row}");
                for &k in &cols {
                    assert!(
                        ["*predicted*", "*fitted*", "*chosen*", "*paper*"].iter().any(|w| c[k].starts_with(w)),
                        "{name}: unlabelled row: {row}"
                    );
                }
            }
        }
        assert!(tables >= 2, "{name}: comparison and sensitivity tables");
        assert!(summary.contains("Sensitivity"), "{name}: no sensitivity section");
        let sens = read(&a, &format!("{name}-sensitivity.csv"));
        assert!(sens.starts_with("constant,basis,default,value,metric,result,paper\n"), "{name}");
        assert!(sens.lines().count() > 3, "{name}: sensitivity rows");
        if deterministic {
            let err = run(name, &tmp(&format!("{name}-b")), &EvalOptions { frames: Some(small(name)), seed: Some(2) })
                .expect_err("a deterministic experiment refuses --seed");
            assert!(err.contains("--seed") && err.contains("no random draws"), "{name}: {err}");
            continue;
        }
        // Seed-sweep rows cover ten seeds from the run's seed on.
        let seeds: std::collections::BTreeSet<&str> =
            sens.lines().filter(|l| l.starts_with("seed,")).map(|l| l.split(',').nth(3).unwrap_or("")).collect();
        assert_eq!(seeds.len(), 10, "{name}: seeds {seeds:?}");
        assert!(summary.contains("Over 10 seeds"), "{name}");
        let b = tmp(&format!("{name}-b"));
        run(name, &b, &EvalOptions { frames: Some(small(name)), seed: Some(2) }).expect(name);
        let raw = |d: &Path| read(d, &format!("{name}.csv"));
        assert_ne!(raw(&a), raw(&b), "{name}: --seed 2 left the raw results unchanged");
        let seed_rows = |d: &Path| -> Vec<String> {
            read(d, &format!("{name}-sensitivity.csv"))
                .lines()
                .filter(|l| l.starts_with("seed,"))
                .map(|l| l.split(',').skip(4).collect::<Vec<_>>().join(","))
                .collect()
        };
        assert_ne!(seed_rows(&a), seed_rows(&b), "{name}: the seed sweep did not move with --seed");
        let _ = fs::remove_dir_all(&a);
        let _ = fs::remove_dir_all(&b);
    }
}
