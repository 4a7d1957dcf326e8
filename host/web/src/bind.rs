//! The bind rule: loopback only, unless the user says otherwise.

use std::net::IpAddr;

/// A bind address that was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BindError {
    /// A non-loopback address without `--allow-remote`.
    #[error(
        "refusing to bind {0}: it is not a loopback address, and anyone who can reach it could drive your agent. \
         Bind 127.0.0.1 (the default) and use an SSH tunnel, or pass --allow-remote to accept it \
         (TLS termination is then yours: put a TLS proxy in front)"
    )]
    NotLoopback(IpAddr),
}

/// Accept `addr` when it is loopback or `allow_remote` is set.
pub fn check_bind(addr: IpAddr, allow_remote: bool) -> Result<(), BindError> {
    if addr.is_loopback() || allow_remote {
        Ok(())
    } else {
        Err(BindError::NotLoopback(addr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_without_allow_remote() {
        assert!(check_bind("127.0.0.1".parse().unwrap(), false).is_ok());
        assert!(check_bind("::1".parse().unwrap(), false).is_ok());
        let err = check_bind("0.0.0.0".parse().unwrap(), false).unwrap_err();
        assert!(err.to_string().contains("--allow-remote"), "{err}");
        assert!(err.to_string().contains("TLS"), "{err}");
        assert!(check_bind("192.168.1.2".parse().unwrap(), false).is_err());
        assert!(check_bind("0.0.0.0".parse().unwrap(), true).is_ok());
    }
}
