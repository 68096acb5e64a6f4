//! Shared by the station property tests (`invariants`, `discipline`, `bytes`).

/// How many cases a property test runs: its committed count, or `PROPTEST_CASES` when that is set (proptest's own
/// variable, which a committed count would otherwise override), e.g. `PROPTEST_CASES=1000` for a long run.
pub fn cases(committed: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(committed)
}
