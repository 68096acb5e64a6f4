//! Fuzz target `frame`: see `keepon::fuzzing::frame`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| keepon::fuzzing::frame(data));
