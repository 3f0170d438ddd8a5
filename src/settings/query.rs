//! `sluice query` arguments: which server, which request, how to print the answer.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Args)]
pub struct QueryArgs {
    /// Server: host:port, http://host:port, or https://host:port (TLS)
    #[arg(long, value_name = "ADDR", default_value = "localhost:8081")]
    pub addr: String,
    /// Rate limit domain
    #[arg(long)]
    pub domain: String,
    /// A descriptor as its entries, KEY=VALUE[,KEY=VALUE…]; repeat for several descriptors
    #[arg(
        long = "descriptor",
        short = 'd',
        value_name = "KEY=VALUE,…",
        required = true,
        value_parser = parse_descriptor
    )]
    pub descriptors: Vec<Descriptor>,
    /// Hits to charge (request hits_addend); 0 asks without charging (descriptor
    /// hits_addend 0, where the server supports it)
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub hits: u32,
    /// Connect with TLS (implied by https:// and by --ca, --cert, --server-name)
    #[arg(long)]
    pub tls: bool,
    /// CA certificates that the server's certificate must chain to (PEM) [default: the
    /// Mozilla roots]
    #[arg(long, value_name = "PATH")]
    pub ca: Option<PathBuf>,
    /// Client certificate chain for mutual TLS (PEM)
    #[arg(long, value_name = "PATH", requires = "key")]
    pub cert: Option<PathBuf>,
    /// Client private key for mutual TLS (PEM)
    #[arg(long, value_name = "PATH", requires = "cert")]
    pub key: Option<PathBuf>,
    /// Name to verify the server's certificate against (and send as SNI) [default: the
    /// host of --addr]
    #[arg(long, value_name = "NAME")]
    pub server_name: Option<String>,
    /// Print the response as JSON (proto3 JSON field names) instead of a table
    #[arg(long)]
    pub json: bool,
    /// Deadline for connecting and for the call
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_timeout)]
    pub timeout: std::time::Duration,
}

/// One descriptor's entries, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Descriptor(pub Vec<(String, String)>);

impl std::fmt::Display for Descriptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{k}={v}")?;
        }
        Ok(())
    }
}

/// `k=v,k2=v2`: entries split on commas, each at its first `=` (values may contain `=`).
pub fn parse_descriptor(s: &str) -> Result<Descriptor, String> {
    let entries = s
        .split(',')
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
            _ => Err(format!("'{pair}' is not KEY=VALUE")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Descriptor(entries))
}

fn parse_timeout(s: &str) -> Result<std::time::Duration, String> {
    super::parse_duration("--timeout", s).map_err(|e| e.message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_parse_and_print_back() {
        let d = parse_descriptor("remote_address=10.0.0.1,path=/a?b=c").unwrap();
        assert_eq!(
            d.0,
            vec![
                ("remote_address".into(), "10.0.0.1".into()),
                ("path".into(), "/a?b=c".into())
            ]
        );
        assert_eq!(d.to_string(), "remote_address=10.0.0.1,path=/a?b=c");
        assert_eq!(
            parse_descriptor("k=").unwrap().0,
            vec![("k".into(), "".into())]
        );
        assert_eq!(parse_descriptor("k").unwrap_err(), "'k' is not KEY=VALUE");
        assert!(parse_descriptor("=v").is_err());
        assert!(parse_descriptor("a=1,,b=2").is_err());
    }
}
