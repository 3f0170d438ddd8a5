//! The trace of one walk of the rule tree ([`Domain::find_traced`]): what happened at each
//! level, for `sluice explain`. The matcher passes `()`, which ignores every step.
//!
//! This file names no type of the tree: a level's children are its two id slices plus the
//! tree's names read through [`NodeNames`], which the tree implements. So `tree.rs` uses this
//! file and not the reverse.
//!
//! [`Domain::find_traced`]: super::Domain::find_traced

/// How an entry matched its node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    /// The child whose finalKey is `key_value`.
    Exact,
    /// The first wildcard child, in declaration order, whose glob matches `key_value`.
    Wildcard,
    /// The child whose finalKey is `key` (the key's default).
    KeyOnly,
}

/// What [`Domain::find_traced`](super::Domain::find_traced) did at one level. `entry` counts from 0.
#[derive(Clone, Copy, Debug)]
pub enum Step<'a> {
    /// The request has no entries: nothing to match.
    NoEntries,
    /// Entry `entry` matched the node `node` (its finalKey) among `children`.
    Matched {
        entry: usize,
        how: How,
        node: &'a str,
        children: Children<'a>,
    },
    /// Nothing among `children` matches entry `entry`: the walk stops (no backtracking).
    NoMatch {
        entry: usize,
        children: Children<'a>,
    },
    /// Entry `entry` matched a node without children, and more entries follow.
    NoChildren { entry: usize },
    /// The last entry, `entry`, landed on a node without a limit.
    NoRule { entry: usize },
    /// The request has more entries than the deepest rule tree can have.
    TooDeep { max: usize },
}

/// Receives the steps of [`Domain::find_traced`](super::Domain::find_traced). `()` ignores them.
pub trait Trace<'a> {
    fn step(&mut self, step: Step<'a>);
}

impl Trace<'_> for () {
    #[inline(always)]
    fn step(&mut self, _: Step<'_>) {}
}

/// A node's finalKey by id: how a trace names the children it is shown (the tree
/// implements it).
pub(super) trait NodeNames {
    fn final_key(&self, id: u32) -> Option<&str>;
}

/// The children of one level of the tree, as a trace sees them.
#[derive(Clone, Copy)]
pub struct Children<'a> {
    names: &'a dyn NodeNames,
    /// `(hash of finalKey, node)` of every child.
    exact: &'a [(u64, u32)],
    /// The wildcard children, in declaration order.
    wildcards: &'a [u32],
}

impl<'a> Children<'a> {
    pub(super) fn new(
        names: &'a dyn NodeNames,
        exact: &'a [(u64, u32)],
        wildcards: &'a [u32],
    ) -> Children<'a> {
        Children {
            names,
            exact,
            wildcards,
        }
    }

    /// Every child's finalKey (`key`, `key_value`, or a glob), in declaration order.
    pub fn final_keys(&self) -> Vec<&'a str> {
        let mut ids: Vec<u32> = self.exact.iter().map(|&(_, id)| id).collect();
        // Nodes are numbered as they are declared.
        ids.sort_unstable();
        self.names(&ids)
    }

    /// The wildcard children's globs, in the order they are tried.
    pub fn wildcards(&self) -> Vec<&'a str> {
        self.names(self.wildcards)
    }

    fn names(&self, ids: &[u32]) -> Vec<&'a str> {
        let names: &'a dyn NodeNames = self.names;
        ids.iter().filter_map(|&id| names.final_key(id)).collect()
    }
}

impl std::fmt::Debug for Children<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.final_keys()).finish()
    }
}
