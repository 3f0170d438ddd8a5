//! Faults under traffic, measured: a Redis Cluster primary killed and slots moved while
//! requests flow (`cluster`), and overload: excess shed, expired deadlines not worked on
//! (`overload`). RELIABILITY.md tabulates what each shows.

mod cluster;
mod cluster_traffic;
mod overload;
