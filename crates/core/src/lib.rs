//! # keepon-core
//!
//! The KeepON driver model (NSDI'26) as pure state machines: no I/O, no threads, no clock reads. Backends in
//! `keepon-nic` drive a [`station::Station`] with observations of a NIC and hand the slots it posts to the
//! hardware (or to the simulator).
//!
//! Read in this order: [`time`] (integer TAI ns, the exact slot period), [`ephc`] (the slot-counting clock),
//! [`ring`] (the CP-PMD phases), [`isolation`] (slot ownership), [`schedule`] (windows and their live change, both timings), [`insert`] (scheduled insertion and its
//! checks), [`prebuffer`] (frames waiting for the window), [`outcome`] (one outcome per frame), [`wire`] (the
//! wire clock's O(1) step and the record of posted slots), [`station`] (all of it together), [`face`] (the one face of both timings), [`testframe`] (the
//! payload header of keepon test traffic), [`dualclock`] (the RX slot clock and the merge rule).
//!
//! ## Adding a backend
//! Implement `keepon_nic::Nic`: report how many slots the NIC has consumed (a count), post the slots the
//! station hands you in order, and say when you saw a gap on the wire if you can. Nothing in this crate
//! changes.
#![cfg_attr(not(test), no_std)]
#![deny(missing_docs)]

extern crate alloc;

pub mod bytes;
pub mod dualclock;
pub mod ephc;
pub mod face;
pub mod frer;
pub mod insert;
pub mod isolation;
pub mod outcome;
pub mod prebuffer;
pub mod ring;
pub mod schedule;
pub mod station;
pub mod testframe;
pub mod time;
pub mod wire;

#[cfg(test)]
mod proptests;
