//! # keepon-ptp
//!
//! PTP synchronisation of keepon's EPHC, sans-IO like `keepon-core`: no sockets, no threads, no clock reads.
//!
//! Read in this order: [`clock`] (the EPHC as the clock a servo steers; adjustments never change the slot
//! count; the bridge to statime's `Clock`), [`servo`] (one trait, explicit states, three servos: statime's
//! Kalman filter, a PI servo, the paper's moving-average frequency filter), [`sim`] (a seeded slave ↔ ideal
//! master simulation in simulated time, for tests and benchmarks), [`a9`] (the paper's A.9 granularity/jitter
//! study).
//!
//! statime (pinned `=0.4.0`, upstream on hold) appears only behind our own types: [`clock::ServoClock`] and
//! [`servo::Servo`]; [`clock::StatimeClock`] adapts the former to statime's `Clock`.
//!
//! ## Timescale
//! The EPHC runs on TAI. A statime master announces the PTP timescale with UTC offset 0, ptp4l in software
//! mode assumes 37 s; [`clock::StatimeClock`] records the announced offset and never applies it.
#![deny(missing_docs)]

pub mod a9;
pub mod clock;
pub mod dualsim;
pub mod servo;
pub mod sim;
