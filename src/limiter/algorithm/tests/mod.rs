//! Unit and property tests of the algorithms and the check protocol.
