//! A variable of the reference (envoyproxy/ratelimit, the service sluice drops in for), as a
//! setting declares it: its name, what it does here, and a value that shows it is read.

/// One of envoyproxy/ratelimit's environment variables that a setting reads. The binary reads
/// only its name; what it does and how the audit probes it are read by the tests that render
/// `docs/reference/envoyproxy-ratelimit-variables.md` and hold the settings to the reference's
/// list (`audit`).
#[derive(Clone, Copy, Debug)]
#[cfg_attr(
    not(test),
    expect(
        dead_code,
        reason = "read by the audit and the settings page, both tests"
    )
)]
pub struct RefVar {
    pub name: &'static str,
    /// What it does here (a row of the reference's variables page); `None`: the setting's
    /// own help, with its flag.
    pub does: Option<&'static str>,
    /// A valid value that changes the resolved settings (the audit sets it and checks that
    /// something changed), and the variables it needs beside it.
    pub probe: &'static str,
    pub with: &'static [(&'static str, &'static str)],
    /// For a family of names (`DOG_STATSD_MOGRIFIER_*`): the member the probe sets.
    pub probe_as: Option<&'static str>,
    /// Read by a library the reference uses (gostats' `STATSD_PROTOCOL`), not by its settings:
    /// not one of the names the audit accounts for.
    pub library: bool,
}

impl RefVar {
    pub const fn new(name: &'static str, probe: &'static str) -> RefVar {
        RefVar {
            name,
            does: None,
            probe,
            with: &[],
            probe_as: None,
            library: false,
        }
    }

    pub const fn does(self, text: &'static str) -> RefVar {
        RefVar {
            does: Some(text),
            ..self
        }
    }

    pub const fn with(self, companions: &'static [(&'static str, &'static str)]) -> RefVar {
        RefVar {
            with: companions,
            ..self
        }
    }

    pub const fn probe_as(self, name: &'static str) -> RefVar {
        RefVar {
            probe_as: Some(name),
            ..self
        }
    }

    pub const fn library(self) -> RefVar {
        RefVar {
            library: true,
            ..self
        }
    }
}
