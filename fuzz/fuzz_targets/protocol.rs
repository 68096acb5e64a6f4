//! Fuzz target `protocol`: see `keepon::fuzzing::protocol`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| keepon::fuzzing::protocol(data));
