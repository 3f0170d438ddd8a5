//! A loose PromQL reader for tests of dashboards and alert rules: which metric names, label
//! names and grouping labels an expression refers to. Not a parser: strings, range
//! selectors, numbers and Grafana variables (`$job`, `${x}`, `$__rate_interval`) are
//! skipped; an identifier followed by `(` is a function; keywords and aggregation operators
//! are known by name; any other identifier is a metric name.

/// One vector selector: `metric{label="…", …}`.
#[derive(Debug, PartialEq, Eq)]
pub struct Selector {
    pub metric: String,
    pub labels: Vec<String>,
}

/// What an expression refers to.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Refs {
    pub selectors: Vec<Selector>,
    /// Label names of `by`, `without`, `on`, `ignoring`, `group_left`, `group_right`.
    pub grouping: Vec<String>,
}

const KEYWORDS: &[&str] = &[
    "and", "or", "unless", "bool", "offset", "atan2", "inf", "nan", "start", "end",
];
const AGGREGATIONS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
];
const GROUPING: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

struct Lexer<'a> {
    s: &'a [u8],
    i: usize,
}

fn ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b':'
}

fn ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b':'
}

impl Lexer<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_whitespace()) {
            self.i += 1;
        }
    }

    fn ident(&mut self) -> String {
        let start = self.i;
        while self.peek().is_some_and(ident_char) {
            self.i += 1;
        }
        String::from_utf8_lossy(&self.s[start..self.i]).into_owned()
    }

    /// Skip a quoted string starting at the current quote.
    fn string(&mut self) {
        let Some(quote) = self.peek() else { return };
        self.i += 1;
        while let Some(c) = self.peek() {
            self.i += 1;
            if c == b'\\' && quote != b'`' {
                self.i += 1;
            } else if c == quote {
                return;
            }
        }
    }

    /// Skip from an opening `open` to its matching `close`.
    fn skip_block(&mut self, open: u8, close: u8) {
        let mut depth = 0;
        while let Some(c) = self.peek() {
            match c {
                b'"' | b'\'' | b'`' => {
                    self.string();
                    continue;
                }
                c if c == open => depth += 1,
                c if c == close => {
                    depth -= 1;
                    if depth == 0 {
                        self.i += 1;
                        return;
                    }
                }
                _ => {}
            }
            self.i += 1;
        }
    }

    /// Label names of a `{…}` matcher block, the lexer at its `{`.
    fn matchers(&mut self) -> Vec<String> {
        let mut labels = Vec::new();
        self.i += 1;
        loop {
            self.skip_ws();
            match self.peek() {
                None => return labels,
                Some(b'}') => {
                    self.i += 1;
                    return labels;
                }
                Some(b'"' | b'\'' | b'`') => self.string(),
                Some(c) if ident_start(c) => labels.push(self.ident()),
                Some(_) => self.i += 1, // operators and commas
            }
        }
    }

    /// Label names of a `(a, b)` list, the lexer at its `(`.
    fn label_list(&mut self) -> Vec<String> {
        let start = self.i + 1;
        self.skip_block(b'(', b')');
        let inner = String::from_utf8_lossy(&self.s[start..self.i.saturating_sub(1)]);
        inner
            .split(',')
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()
    }
}

/// Metric selectors and grouping labels of a PromQL expression.
pub fn refs(expr: &str) -> Refs {
    let mut lx = Lexer {
        s: expr.as_bytes(),
        i: 0,
    };
    let mut out = Refs::default();
    while let Some(c) = lx.peek() {
        match c {
            b'"' | b'\'' | b'`' => lx.string(),
            b'[' => lx.skip_block(b'[', b']'),
            b'{' => {
                // A selector without a metric name (`{__name__=~"…"}`): its labels only.
                let labels = lx.matchers();
                out.selectors.push(Selector {
                    metric: String::new(),
                    labels,
                });
            }
            b'$' => {
                lx.i += 1;
                if lx.peek() == Some(b'{') {
                    lx.skip_block(b'{', b'}');
                } else {
                    lx.ident();
                }
            }
            c if c.is_ascii_digit()
                || (c == b'.' && lx.s.get(lx.i + 1).is_some_and(u8::is_ascii_digit)) =>
            {
                while lx
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'_')
                {
                    lx.i += 1;
                }
            }
            c if ident_start(c) => {
                let word = lx.ident();
                lx.skip_ws();
                let next = lx.peek();
                if GROUPING.contains(&word.as_str()) {
                    if next == Some(b'(') {
                        out.grouping.extend(lx.label_list());
                    }
                } else if KEYWORDS.contains(&word.as_str())
                    || AGGREGATIONS.contains(&word.as_str())
                    || next == Some(b'(')
                {
                    // A keyword, an aggregation, or a function call.
                } else {
                    let labels = if next == Some(b'{') {
                        lx.matchers()
                    } else {
                        Vec::new()
                    };
                    out.selectors.push(Selector {
                        metric: word,
                        labels,
                    });
                }
            }
            _ => lx.i += 1,
        }
    }
    out
}

/// Label names a legend template (`{{instance}} p99`) or alert annotation refers to.
pub fn template_labels(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        let inner = after[..end].trim();
        // Grafana: `{{label}}`; Prometheus templates: `{{ $labels.label }}`.
        let name = inner.strip_prefix("$labels.").unwrap_or(inner);
        if !name.is_empty() && name.bytes().all(ident_char) {
            out.push(name.to_owned());
        }
        rest = &after[end + 2..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_selectors_grouping_and_skips_the_rest() {
        let r = refs(
            r#"histogram_quantile(0.99, sum by (job, le) (rate(x_bucket{job=~"$job", a!="}"}[$__rate_interval])))
              / ignoring (kind) group_left sum without(b) (y offset 5m) > bool 1e3 and on() up"#,
        );
        let sel: Vec<(&str, Vec<&str>)> = r
            .selectors
            .iter()
            .map(|s| {
                (
                    s.metric.as_str(),
                    s.labels.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            sel,
            [
                ("x_bucket", vec!["job", "a"]),
                ("y", vec![]),
                ("up", vec![])
            ]
        );
        assert_eq!(r.grouping, ["job", "le", "kind", "b"]);
        assert_eq!(
            template_labels("{{ $labels.instance }}: {{kind}} {{ $value }}"),
            ["instance", "kind"]
        );
    }
}
