//! keepon NIC backends.
