//! Where a request comes from: the `Host` it was sent to and the `Origin`
//! of the page that sent it, checked on every request before the token.
//!
//! * **Host** (DNS rebinding): a page on `evil.example` whose name is made
//!   to resolve to 127.0.0.1 reaches this server with `Host:
//!   evil.example:7420` and is same-origin with itself. Only names that
//!   cannot be rebound by someone else are accepted: `localhost`, a
//!   loopback IP literal, the IP the server is bound to (any IP literal
//!   when it is bound to all addresses), and the names the user allowed
//!   with `--allow-host`. The port is not compared: an SSH tunnel may map
//!   the server to another local port.
//! * **Origin**: a browser names the page that sent a request in `Origin`
//!   on every cross-origin request and every state-changing one. When it
//!   is present it must be this very server, `http(s)://` plus the `Host`
//!   the request was sent to, port included — a page on another port of
//!   the same machine is another origin. `Origin: null` (a sandboxed frame,
//!   a file) is refused. A request without `Origin` does not come from a
//!   page of another origin (command-line clients send none) and still
//!   needs the token.

use super::AppState;
use super::auth::Refusal;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::IpAddr;
use std::sync::Arc;

/// Which `Host` names reach this server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostRule {
    /// The address the server is bound to.
    pub bound: IpAddr,
    /// Further names the user allowed (`--allow-host`), lower case.
    pub allowed: Vec<String>,
}

impl HostRule {
    /// The rule for a server bound to `bound` that also answers to
    /// `allowed` names.
    pub fn new(bound: IpAddr, allowed: &[String]) -> HostRule {
        HostRule {
            bound,
            allowed: allowed
                .iter()
                .map(|n| n.trim().to_ascii_lowercase())
                .collect(),
        }
    }

    /// True when `name` (a `Host` without its port) is this server.
    fn accepts(&self, name: &str) -> bool {
        let name = name.to_ascii_lowercase();
        if name == "localhost" || self.allowed.contains(&name) {
            return true;
        }
        let literal = name
            .strip_prefix('[')
            .and_then(|n| n.strip_suffix(']'))
            .unwrap_or(&name);
        match literal.parse::<IpAddr>() {
            Ok(ip) => ip.is_loopback() || ip == self.bound || self.bound.is_unspecified(),
            Err(_) => false,
        }
    }

    /// Check the `Host` header; returns it (for the Origin check).
    pub fn check<'h>(&self, headers: &'h HeaderMap) -> Result<&'h str, Refusal> {
        let raw = headers
            .get(header::HOST)
            .ok_or(Refusal::MissingHost)?
            .to_str()
            .map_err(|_| self.foreign("(not text)"))?;
        let host = raw.trim();
        match split_host(host) {
            Some(name) if self.accepts(name) => Ok(host),
            _ => Err(self.foreign(host)),
        }
    }

    fn foreign(&self, host: &str) -> Refusal {
        Refusal::ForeignHost {
            host: host.to_string(),
            bound: self.bound.to_string(),
        }
    }
}

/// The name of a `host[:port]` authority (IPv6 literals keep their
/// brackets); None when it is malformed.
fn split_host(authority: &str) -> Option<&str> {
    if authority.is_empty() || authority.contains(['@', '/', ' ', '\\']) {
        return None;
    }
    let (name, port) = if authority.starts_with('[') {
        let end = authority.find(']')?;
        let (name, rest) = authority.split_at(end + 1);
        (name, rest.strip_prefix(':'))
    } else {
        match authority.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (authority, None),
        }
    };
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.parse::<u16>().is_ok());
    (port_ok && !name.is_empty() && (!name.contains(':') || name.starts_with('['))).then_some(name)
}

/// Check the `Origin` header, when present, against the `host` the
/// request was sent to.
pub fn check_origin(headers: &HeaderMap, host: &str) -> Result<(), Refusal> {
    let Some(value) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let origin = value.to_str().unwrap_or("(not text)").trim();
    let authority = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    match authority {
        Some(a) if a.eq_ignore_ascii_case(host) => Ok(()),
        _ => Err(Refusal::CrossOrigin {
            origin: origin.to_string(),
            host: host.to_string(),
        }),
    }
}

/// The middleware on every route: `Host`, then `Origin`.
pub async fn require(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let checked = state
        .hosts
        .check(request.headers())
        .and_then(|host| check_origin(request.headers(), host));
    match checked {
        Ok(()) => next.run(request).await,
        Err(refusal) => refusal.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn loopback() -> HostRule {
        HostRule::new("127.0.0.1".parse().unwrap(), &[])
    }

    #[test]
    fn hosts_that_cannot_be_rebound_pass_and_names_do_not() {
        let rule = loopback();
        for ok in [
            "127.0.0.1:7420",
            "127.0.0.1",
            "localhost:7420",
            "LOCALHOST:9",
            "[::1]:7420",
            "127.0.0.2:80",
        ] {
            assert_eq!(rule.check(&headers(&[("host", ok)])), Ok(ok), "{ok}");
        }
        for bad in [
            "evil.example:7420",
            "localhost.evil.example:7420",
            "evil.localhost:7420",
            "192.168.1.9:7420",
            "127.0.0.1:notaport",
            "127.0.0.1:",
            "user@127.0.0.1:7420",
            "::1:7420",
            "",
        ] {
            let err = rule.check(&headers(&[("host", bad)])).unwrap_err();
            assert_eq!(err.kind(), "foreign_host", "{bad}");
            assert!(err.to_string().contains("--allow-host"), "{err}");
        }
        assert_eq!(rule.check(&HeaderMap::new()), Err(Refusal::MissingHost));
    }

    #[test]
    fn a_remote_bind_accepts_its_address_and_the_names_allowed() {
        let rule = HostRule::new("10.0.0.5".parse().unwrap(), &["Latch.Example".into()]);
        assert!(rule.check(&headers(&[("host", "10.0.0.5:7420")])).is_ok());
        assert!(rule.check(&headers(&[("host", "latch.example")])).is_ok());
        assert!(rule.check(&headers(&[("host", "10.0.0.6:7420")])).is_err());
        assert!(rule.check(&headers(&[("host", "other.example")])).is_err());
        let any = HostRule::new("0.0.0.0".parse().unwrap(), &[]);
        assert!(any.check(&headers(&[("host", "10.0.0.6:7420")])).is_ok());
        assert!(
            any.check(&headers(&[("host", "evil.example:7420")]))
                .is_err()
        );
    }

    #[test]
    fn the_origin_must_be_this_server_when_sent() {
        let host = "127.0.0.1:7420";
        assert_eq!(check_origin(&HeaderMap::new(), host), Ok(()));
        for ok in ["http://127.0.0.1:7420", "https://127.0.0.1:7420"] {
            assert_eq!(check_origin(&headers(&[("origin", ok)]), host), Ok(()));
        }
        for bad in [
            "http://127.0.0.1:3000",
            "http://localhost:7420",
            "http://evil.example",
            "null",
            "ftp://127.0.0.1:7420",
            "http://127.0.0.1:7420.evil.example",
        ] {
            let err = check_origin(&headers(&[("origin", bad)]), host).unwrap_err();
            assert_eq!(err.kind(), "cross_origin", "{bad}");
            assert!(err.to_string().contains(bad), "{err}");
        }
    }
}
