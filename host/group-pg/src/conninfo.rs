//! Connection strings as text: both forms libpq accepts — a URL
//! (`postgres://user:password@host:5432/db?sslmode=require`) and key-value
//! pairs (`host=db user=latch password='s e c r e t'`) — read into their
//! parameters with the byte span of each, so a password can be hidden or
//! dropped wherever it is written (the URL's user info, a `password` query
//! parameter, a quoted or escaped key-value), and the TLS parameters
//! tokio-postgres does not read (`sslmode=verify-full`, `sslrootcert`) can
//! be taken out before it parses the rest.

use std::ops::Range;

/// One parameter of a connection string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Param {
    /// Its name, decoded.
    pub key: String,
    /// Its value, decoded (quotes, escapes, percent-encoding removed).
    pub value: String,
    /// The bytes of the whole parameter (`key=value`, or the URL's
    /// password) in the string.
    pub span: Range<usize>,
    /// The bytes of its value as written.
    pub value_span: Range<usize>,
}

/// True when `s` is a URL (`postgres://` or `postgresql://`).
pub(crate) fn is_url(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

/// The parameters of `s` in order. For a URL: its password (as
/// `password`, spanning `:password`) and its query parameters; host, user
/// and database are not listed. Unparseable text yields what parsed.
pub(crate) fn params(s: &str) -> Vec<Param> {
    if is_url(s) {
        url_params(s)
    } else {
        kv_params(s)
    }
}

fn url_params(s: &str) -> Vec<Param> {
    let mut out = Vec::new();
    let start = s.find("://").map(|i| i + 3).unwrap_or(0);
    let query_at = s[start..].find('?').map(|i| i + start).unwrap_or(s.len());
    // The user info ends at the last `@` before the query: a password
    // holding an unencoded `@` is still hidden whole.
    if let Some(at) = s[start..query_at].rfind('@').map(|i| i + start)
        && let Some(colon) = s[start..at].find(':').map(|i| i + start)
    {
        out.push(Param {
            key: "password".into(),
            value: percent_decode(&s[colon + 1..at]),
            span: colon..at,
            value_span: colon + 1..at,
        });
    }
    if query_at < s.len() {
        let mut at = query_at + 1;
        for part in s[query_at + 1..].split('&') {
            let span = at..at + part.len();
            at += part.len() + 1;
            if part.is_empty() {
                continue;
            }
            let (key, value, value_span) = match part.split_once('=') {
                Some((k, v)) => (k, v, span.start + k.len() + 1..span.end),
                None => (part, "", span.end..span.end),
            };
            out.push(Param {
                key: percent_decode(key),
                value: percent_decode(value),
                span,
                value_span,
            });
        }
    }
    out
}

fn kv_params(s: &str) -> Vec<Param> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let ws = |c: u8| c.is_ascii_whitespace();
    loop {
        while i < b.len() && ws(b[i]) {
            i += 1;
        }
        if i >= b.len() {
            return out;
        }
        let start = i;
        while i < b.len() && !ws(b[i]) && b[i] != b'=' {
            i += 1;
        }
        let key = s[start..i].to_string();
        while i < b.len() && ws(b[i]) {
            i += 1;
        }
        if i >= b.len() || b[i] != b'=' {
            return out;
        }
        i += 1;
        while i < b.len() && ws(b[i]) {
            i += 1;
        }
        let value_start = i;
        let mut value = Vec::new();
        if i < b.len() && b[i] == b'\'' {
            i += 1;
            while i < b.len() && b[i] != b'\'' {
                if b[i] == b'\\' && i + 1 < b.len() {
                    i += 1;
                }
                value.push(b[i]);
                i += 1;
            }
            // The closing quote (or the end of an unterminated value).
            i = (i + 1).min(b.len());
        } else {
            while i < b.len() && !ws(b[i]) {
                if b[i] == b'\\' && i + 1 < b.len() {
                    i += 1;
                }
                value.push(b[i]);
                i += 1;
            }
        }
        out.push(Param {
            key,
            value: String::from_utf8_lossy(&value).into_owned(),
            span: start..i,
            value_span: value_start..i,
        });
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `s` with the spans of the parameters `pick` chooses replaced by what
/// `with` gives for each, or removed where it gives `None` (with the space
/// after a key-value, or the `&` of a URL query parameter).
pub(crate) fn replace(
    s: &str,
    pick: impl Fn(&Param) -> bool,
    with: impl Fn(&Param) -> Option<String>,
) -> String {
    let url = is_url(s);
    let mut out = String::with_capacity(s.len());
    let mut at = 0;
    for p in params(s).iter().filter(|p| pick(p)) {
        if p.span.start < at {
            continue;
        }
        out.push_str(&s[at..p.span.start]);
        at = p.span.end;
        match with(p) {
            Some(text) => out.push_str(&text),
            None if url => {
                if s[at..].starts_with('&') {
                    at += 1;
                }
            }
            None => at += s[at..].len() - s[at..].trim_start().len(),
        }
    }
    out.push_str(&s[at..]);
    if url {
        // A query left empty, or ending in `&`, by a removal.
        while out.ends_with('&') || out.ends_with('?') {
            out.pop();
        }
        out.replace("?&", "?")
    } else {
        out.trim_end().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(s: &str) -> Vec<(String, String)> {
        params(s).into_iter().map(|p| (p.key, p.value)).collect()
    }

    #[test]
    fn key_value_strings_parse_as_libpq_writes_them() {
        assert_eq!(
            pairs(r"host=/tmp user = latch password='s e \'c' dbname=g sslmode=require"),
            vec![
                ("host".into(), "/tmp".into()),
                ("user".into(), "latch".into()),
                ("password".into(), "s e 'c".into()),
                ("dbname".into(), "g".into()),
                ("sslmode".into(), "require".into()),
            ]
        );
        assert_eq!(
            pairs(r"password=a\ b host=h"),
            vec![
                ("password".into(), "a b".into()),
                ("host".into(), "h".into())
            ]
        );
    }

    #[test]
    fn urls_give_their_password_and_query() {
        assert_eq!(
            pairs(
                "postgres://latch:s3cr@t@db:5432/g?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem"
            ),
            vec![
                ("password".into(), "s3cr@t".into()),
                ("sslmode".into(), "verify-full".into()),
                ("sslrootcert".into(), "/etc/ca.pem".into()),
            ]
        );
        assert_eq!(pairs("postgresql://db/g"), vec![]);
        assert_eq!(
            pairs("postgres://u@db/g?password=x%20y"),
            vec![("password".into(), "x y".into())]
        );
    }

    #[test]
    fn parameters_can_be_dropped_cleanly() {
        let drop_ssl = |s: &str| replace(s, |p| p.key.starts_with("ssl"), |_| None);
        assert_eq!(
            drop_ssl("postgres://db/g?sslmode=verify-full&application_name=x&sslrootcert=/c"),
            "postgres://db/g?application_name=x"
        );
        assert_eq!(
            drop_ssl("postgres://db/g?sslmode=require"),
            "postgres://db/g"
        );
        assert_eq!(
            drop_ssl("host=db sslrootcert='/a b/ca.pem' user=latch"),
            "host=db user=latch"
        );
    }
}
