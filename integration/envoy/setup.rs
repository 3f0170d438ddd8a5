//! The setup the Envoy tests share: sluice serving the domain `front` with one rule for
//! `generic_key=front` (the descriptor a [`Front`] sends unless a test sets its own), and a
//! `Front` asking that sluice.

use std::time::Duration;

use crate::support::envoy::{Front, Rls};
use crate::support::sluice::{Builder, Sluice, sluice};

/// How long a step that waits on Envoy or sluice may take on a loaded machine.
pub const WITHIN: Duration = Duration::from_secs(20);

/// The rule file for domain `front`: `generic_key=front` limited by `rate_limit`, the fields
/// of the rule's `rate_limit` map (`unit: minute, requests_per_unit: 2`).
pub fn rules(rate_limit: &str) -> String {
    format!(
        "\
domain: front
descriptors:
  - key: generic_key
    value: front
    rate_limit: {{{rate_limit}}}
"
    )
}

/// sluice with `rules` as its one rule file (`front.yaml`), for a test to add its flags to
/// before it starts it.
pub fn serving(rules: &str) -> Builder {
    sluice().file("front.yaml", rules)
}

/// How Envoy reaches `s`: its own gRPC client over TCP, or gRPC C-core when `google`.
pub fn rls(s: &Sluice, google: bool) -> Rls {
    if google {
        Rls::Google(s.grpc.to_string())
    } else {
        Rls::Tcp(vec![s.grpc])
    }
}

/// A front for domain `front` asking `s` with Envoy's own gRPC client over TCP.
pub fn front_asking(s: &Sluice) -> Front {
    Front::new("front", rls(s, false))
}
