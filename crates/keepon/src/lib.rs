//! # keepon
//!
//! The keepon runtime's command-line layer: configuration, runs on a backend, per-frame records, pcap,
//! reports and the paper's experiments. The driver model itself is `keepon-core`; backends are `keepon-nic`.
#![deny(missing_docs)]

pub mod api;
pub mod backend;
pub mod client;
pub mod clock;
pub mod config;
pub mod daemon;
pub mod deadline;
pub mod fuzzing;
pub mod listen;
pub mod netrun;
pub mod notify;
pub mod pcap;
pub mod ptpconf;
pub mod ptproom;
pub mod realtime;
pub mod record;
pub mod report;
pub mod run;
pub mod schedule;
pub mod status;
pub mod summary;
pub use keepon_eval::table3;
pub mod talk;

/// The timing diagram shown by `keepon --help`.
pub const TIMING_DIAGRAM: &str = r#"
How keepon times a frame (δ = (slot_bytes + 20)·8 / rate; N ring slots; slot k starts at T0 + k·δ):

  wire:  |fill|fill| RT |fill|fill| BE |fill|fill|fill| RT |fill| ...  every slot exactly δ, back to back
         k    k+1  k+2  ...
  ring:  ring slot = k mod N; class c may only use the slots its mask owns (unowned = best effort)

  host:  poll ──────────── poll ──────────── poll         each poll: observe consumed count c,
           │ posts up to c+batch                            reclaim consumed real slots to fillers,
           ▼                                                place frames, post up to c + batch
  ─────────┬──────────────┬─────────────────────┬──────▶ slots
           c          c + batch             c + N
           ├ on the NIC ──┼─ insertion window ──┤
                          (not yet posted: a frame may still be placed here)

  A frame scheduled at txtime t goes in slot k = slot_of(t): time_of(k) ≤ t < time_of(k+1).
  It must arrive while k is in the window:   c + batch ≤ k < c + N
    i.e. advance ≥ batch·δ before t (else: late) and < N·δ ahead (else: pre-buffered until it is).
  It leaves at exactly time_of(k) (its TX timestamp); strict: slot taken or not owned → rejected;
  relaxed: earliest free owned slot not earlier than k, within one ring cycle.
  The link stays saturated while poll cycle < batch·δ; otherwise it underruns: detected, reported,
  and the clock re-anchored.
"#;
