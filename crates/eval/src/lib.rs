//! # keepon-eval
//!
//! The paper's evaluation on the simulated NIC: keepon (the real station, run by the real loop) against
//! explicit, seeded models of its baselines — an i210-like LaunchTime NIC and the stock driver with ETF — all
//! through the same wire and receiver model, measured side by side in one run. Every result is **simulated**;
//! every distribution states its source, and those tuned to land on a paper value say so.
//!
//! - [`dist`]: seeded draws (normal, log-normal, AR(1)).
//! - [`realism`]: oscillators, PHY jitter, cable, the receiver's clock and 8 ns timestamps.
//! - [`model`]: what station models produce; the shared best-effort background.
//! - [`keepon`]: keepon's station on the simulated NIC.
//! - [`baseline`]: the LaunchTime and stock-driver models.
//! - [`stats`]: inter-arrival jitter.
//! - [`measure`]: deliver a model's frames through the wire and measure them.
//! - [`fig15`]: the paper's Fig 15.
//! - [`fig16`]: the paper's Fig 16 (advance time, periods).
//! - [`fig17`]: the paper's Fig 17 (padding).
//! - [`fig18`]: the paper's Fig 18 (best-effort share under isolation).
//! - [`table3`]: the paper's Table 3 (poll loop: throughput vs batch × poll period), also `keepon table3`.
//! - [`network`]: 802.1Qbv switches, store-and-forward, the network-wide schedule.
//! - [`casestudy`]: the paper's §7 case study (Table 1, Fig 26).
//! - [`plandir`], [`netplan`], [`netreport`]: `keepon eval network --plan DIR`, a `keepon-plan network` plan
//!   replayed: its talkers as real stations, its switches with their gate lists.
//! - [`robustness`]: on time and deviation under host jitter, preemption, DMA stalls and late completions.
//! - [`provenance`]: how each number was obtained (predicted, fitted, chosen, paper); sensitivity sweeps.
//! - [`plot`]: `keepon report --plot` (the Python plotting code on any records file).
//! - [`cli`]: `keepon eval NAME --out DIR`.
#![deny(missing_docs)]

pub mod baseline;
pub mod casestudy;
pub mod cli;
pub mod dist;
pub mod fig15;
pub mod fig16;
pub mod fig17;
pub mod fig18;
pub mod fig19;
pub mod host;
pub mod keepon;
pub mod measure;
pub mod model;
pub mod netplan;
pub mod netreport;
pub mod network;
pub mod plandir;
pub mod plot;
pub mod provenance;
pub mod realism;
pub mod robustness;
pub mod stats;
pub mod table3;
