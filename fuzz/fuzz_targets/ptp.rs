//! Fuzz target `ptp`: see `keepon::fuzzing::ptp` (PTP over L2 and UDPv4, IGMP queries).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| keepon::fuzzing::ptp(data));
