//! Native (in-process) implementations of every algorithm; see docs/algorithms.md.
