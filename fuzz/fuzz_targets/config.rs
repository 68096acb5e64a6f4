//! Fuzz target `config`: see `keepon::fuzzing::config`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| keepon::fuzzing::config(data));
