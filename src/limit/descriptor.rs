//! A request descriptor written as text, `key=value,key2=value2`: the one syntax of every
//! operator tool (`sluice query` and `sluice explain --descriptor`, the `descriptor`
//! parameter of `/explain` and of the admin listener's `/state`).
//!
//! It lives in the shared vocabulary because its callers sit in layers that cannot use one
//! another (`settings` parses the command lines, `service` the HTTP queries, `explain` is
//! tested with it); one parser means one set of rules and messages for all of them.

use std::fmt;

/// One descriptor's entries, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Descriptor(pub Vec<(String, String)>);

impl fmt::Display for Descriptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{k}={v}")?;
        }
        Ok(())
    }
}

/// `k=v,k2=v2`: entries split on `,`, each at its first `=` (so a value may contain `=`,
/// but not `,`). Keys and values are kept byte for byte, as Envoy would send them: no
/// trimming. An empty value (`key=`) is allowed, as Envoy may send one; an empty key, an
/// entry without `=` (`a=1,,b=2` and `a=1,` have one) and an empty descriptor are errors,
/// each message naming the entry at fault.
pub fn parse_descriptor(s: &str) -> Result<Descriptor, String> {
    if s.is_empty() {
        return Err("a descriptor needs at least one key=value entry".to_owned());
    }
    s.split(',')
        .map(|entry| match entry.split_once('=') {
            Some(("", _)) => Err(format!("descriptor entry '{entry}' has an empty key")),
            Some((k, v)) => Ok((k.to_owned(), v.to_owned())),
            None => Err(format!("descriptor entry '{entry}' is not key=value")),
        })
        .collect::<Result<_, _>>()
        .map(Descriptor)
}

/// A quota bucket (RLQS `BucketId`) written as text: `k=v,k2=v2` in any order, as the
/// descriptor a quota stream matches it as, its entries sorted by key (a `BucketId` is an
/// unordered map). `sluice explain --bucket` and `/explain?bucket=`.
pub fn parse_bucket(s: &str) -> Result<Descriptor, String> {
    let mut d = parse_descriptor(s)?;
    d.0.sort_by(|a, b| a.0.cmp(&b.0));
    if d.0.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(format!("bucket '{s}' names a key twice"));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_sorted_by_key() {
        assert_eq!(
            parse_bucket("tier=gold,name=api").map(|d| d.to_string()),
            Ok("name=api,tier=gold".to_owned())
        );
        assert!(parse_bucket("a=1,a=2").is_err());
    }

    fn entries(s: &str) -> Result<Vec<(String, String)>, String> {
        parse_descriptor(s).map(|d| d.0)
    }

    #[test]
    fn entries_split_on_commas_and_the_first_equals_sign() {
        assert_eq!(
            entries("a=1,b=x=y,c="),
            Ok(vec![
                ("a".into(), "1".into()),
                ("b".into(), "x=y".into()),
                ("c".into(), String::new())
            ])
        );
        assert_eq!(
            entries("remote_address=10.0.0.1,path=/a?b=c"),
            Ok(vec![
                ("remote_address".into(), "10.0.0.1".into()),
                ("path".into(), "/a?b=c".into())
            ])
        );
        assert_eq!(entries("k="), Ok(vec![("k".into(), "".into())]));
    }

    #[test]
    fn printed_back_as_written() {
        let d = parse_descriptor("remote_address=10.0.0.1,path=/a?b=c").unwrap();
        assert_eq!(d.to_string(), "remote_address=10.0.0.1,path=/a?b=c");
    }

    #[test]
    fn malformed_descriptors_say_which_entry() {
        assert_eq!(
            entries(""),
            Err("a descriptor needs at least one key=value entry".into())
        );
        assert_eq!(
            entries("k"),
            Err("descriptor entry 'k' is not key=value".into())
        );
        assert_eq!(
            entries("=v"),
            Err("descriptor entry '=v' has an empty key".into())
        );
        assert_eq!(
            entries("a=1,,b=2"),
            Err("descriptor entry '' is not key=value".into())
        );
        assert!(entries("a=1,").is_err());
    }
}
