//! One of envoyproxy/ratelimit's variables, as a setting declares it: its name (all the
//! binary keeps), and for the tests and the reference what it does here and a value that shows
//! it is read (`audit`).

/// One envoyproxy/ratelimit variable a setting reads. Only its name is kept in the binary;
/// what it does and how the audit probes it are for the tests and the reference (`audit`).
#[derive(Clone, Copy, Debug)]
pub struct Their {
    pub name: &'static str,
    /// What it does here (the reference's table of their variables); `None`: the setting's
    /// own help, with its flag.
    #[cfg(test)]
    pub does: Option<&'static str>,
    /// A valid value that changes the resolved settings (the audit sets it and checks that
    /// something changed), and the variables it needs beside it.
    #[cfg(test)]
    pub probe: &'static str,
    #[cfg(test)]
    pub with: &'static [(&'static str, &'static str)],
    /// For a family of names (`DOG_STATSD_MOGRIFIER_*`): the member the probe sets.
    #[cfg(test)]
    pub probe_as: Option<&'static str>,
    /// Read by a library of theirs (gostats' `STATSD_PROTOCOL`), not by their settings: not
    /// one of the names the audit accounts for.
    #[cfg(test)]
    pub library: bool,
}

#[cfg(test)]
impl Their {
    pub const fn new(name: &'static str, probe: &'static str) -> Their {
        Their {
            name,
            does: None,
            probe,
            with: &[],
            probe_as: None,
            library: false,
        }
    }

    pub const fn does(self, text: &'static str) -> Their {
        Their {
            does: Some(text),
            ..self
        }
    }

    pub const fn with(self, companions: &'static [(&'static str, &'static str)]) -> Their {
        Their {
            with: companions,
            ..self
        }
    }

    pub const fn probe_as(self, name: &'static str) -> Their {
        Their {
            probe_as: Some(name),
            ..self
        }
    }

    pub const fn library(self) -> Their {
        Their {
            library: true,
            ..self
        }
    }
}

#[cfg(not(test))]
impl Their {
    pub const fn new(name: &'static str, _probe: &'static str) -> Their {
        Their { name }
    }

    pub const fn does(self, _text: &'static str) -> Their {
        self
    }

    pub const fn with(self, _companions: &'static [(&'static str, &'static str)]) -> Their {
        self
    }

    pub const fn probe_as(self, _name: &'static str) -> Their {
        self
    }

    pub const fn library(self) -> Their {
        self
    }
}
