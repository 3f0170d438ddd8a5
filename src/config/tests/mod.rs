//! Unit tests of the config module.
