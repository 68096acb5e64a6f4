//! Fuzz target `station`: see `keepon::fuzzing::station`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| keepon::fuzzing::station(data));
