//! Property tests of the station invariants live here (filled in below).
