//! Their `SanitizeStatName`, applied to stats keys before they become label values and
//! statsd names.

/// Their `SanitizeStatName`: `:` and `|` become `_`, and the dots of IPv4-looking
/// substrings become `_` so an address does not split into levels.
pub fn sanitize(key: &str) -> String {
    let mut out: Vec<u8> = key
        .bytes()
        .map(|b| if b == b':' || b == b'|' { b'_' } else { b })
        .collect();
    let bytes = out.clone();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() && (i == 0 || !bytes[i - 1].is_ascii_digit()) {
            // Try to read d{1,3}(.d{1,3}){3} starting here.
            let mut j = i;
            let mut dots = Vec::new();
            let mut ok = true;
            for part in 0..4 {
                let start = j;
                while j < bytes.len() && bytes[j].is_ascii_digit() && j - start < 3 {
                    j += 1;
                }
                if j == start {
                    ok = false;
                    break;
                }
                if part < 3 {
                    if j < bytes.len() && bytes[j] == b'.' {
                        dots.push(j);
                        j += 1;
                    } else {
                        ok = false;
                        break;
                    }
                }
            }
            if ok {
                for d in dots {
                    out[d] = b'_';
                }
                i = j;
                continue;
            }
        }
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| key.to_string())
}
