//! Member leases as data: what a member holds once it joined
//! ([`Membership`]: its epoch and, on a store with leases, a
//! [`LeaseWatch`] that says when the lease is lost), and a lease as a store
//! reports it ([`MemberLease`]). No clock and no I/O here: the store renews
//! leases and decides expiry on its own clock; the kernel's commit check
//! ([`super::check::expire`]) turns expired leases into events.

use std::sync::{Arc, Mutex};

/// A member's lease as the store's clock sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberLease {
    /// The member's session id.
    pub member: String,
    /// The membership epoch it was taken for.
    pub epoch: u64,
    /// The host the member runs on.
    pub host: String,
    /// The process that renews it.
    pub pid: u32,
    /// How long a renewal keeps it (ms).
    pub ttl_ms: u64,
    /// Until expiry on the store's clock (ms); negative once expired.
    pub expires_in_ms: i64,
}

impl MemberLease {
    /// True once the store's clock passed its expiry.
    pub fn expired(&self) -> bool {
        self.expires_in_ms <= 0
    }

    /// One line for the views: `lease 12 s left (host-a pid 412)`.
    pub fn describe(&self) -> String {
        let when = if self.expired() {
            format!(
                "lease expired {} s ago",
                (-self.expires_in_ms).max(0) / 1000
            )
        } else {
            format!("lease {} s left", (self.expires_in_ms + 999) / 1000)
        };
        format!("{when} ({} pid {})", self.host, self.pid)
    }
}

type OnLost = Box<dyn Fn(&str) + Send + Sync>;

/// Whether a member's lease still holds, as the process renewing it knows:
/// lost once a renewal finds the lease gone (the store removed the member:
/// expired, evicted) or no renewal reached the store for a whole TTL.
/// Callbacks run once, on the thread that finds it lost.
#[derive(Default)]
pub struct LeaseWatch {
    lost: Mutex<Option<String>>,
    on_lost: Mutex<Vec<OnLost>>,
}

impl std::fmt::Debug for LeaseWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseWatch")
            .field("lost", &self.lost())
            .finish()
    }
}

impl LeaseWatch {
    /// A lease that holds.
    pub fn new() -> Arc<LeaseWatch> {
        Arc::new(LeaseWatch::default())
    }

    /// Why the lease was lost, once it is.
    pub fn lost(&self) -> Option<String> {
        self.lost.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Mark the lease lost for `reason` (the first reason stays) and run
    /// the callbacks.
    pub fn lose(&self, reason: &str) {
        {
            let mut lost = self.lost.lock().unwrap_or_else(|p| p.into_inner());
            if lost.is_some() {
                return;
            }
            *lost = Some(reason.to_string());
        }
        let callbacks =
            std::mem::take(&mut *self.on_lost.lock().unwrap_or_else(|p| p.into_inner()));
        for f in callbacks {
            f(reason);
        }
    }

    /// Run `f` with the reason when the lease is lost (at once when it is
    /// already).
    pub fn on_lost(&self, f: impl Fn(&str) + Send + Sync + 'static) {
        // `lose` sets the reason before it takes the callbacks: under their
        // lock, either the reason is set (run `f` here) or `lose` will run
        // it.
        let mut callbacks = self.on_lost.lock().unwrap_or_else(|p| p.into_inner());
        match self.lost() {
            Some(reason) => {
                drop(callbacks);
                f(&reason);
            }
            None => callbacks.push(Box::new(f)),
        }
    }
}

/// What a member holds once it joined: its epoch, and its lease on a store
/// that keeps them (dropping the last handle stops the renewals).
#[derive(Clone, Debug)]
pub struct Membership {
    /// The sequence number of the join that made the member active: every
    /// request it makes carries it.
    pub epoch: u64,
    /// Its lease, on a store with leases.
    pub lease: Option<Arc<LeaseWatch>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_lost_lease_runs_each_callback_once_with_the_first_reason() {
        let w = LeaseWatch::new();
        let n = Arc::new(AtomicUsize::new(0));
        let seen = n.clone();
        w.on_lost(move |r| {
            assert_eq!(r, "expired");
            seen.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(w.lost(), None);
        w.lose("expired");
        w.lose("again");
        assert_eq!(w.lost().as_deref(), Some("expired"));
        assert_eq!(n.load(Ordering::SeqCst), 1);
        let late = n.clone();
        w.on_lost(move |_| {
            late.fetch_add(10, Ordering::SeqCst);
        });
        assert_eq!(n.load(Ordering::SeqCst), 11, "a late callback runs at once");
    }

    #[test]
    fn a_lease_describes_its_time_left_and_holder() {
        let mut l = MemberLease {
            member: "m".into(),
            epoch: 3,
            host: "host-a".into(),
            pid: 41,
            ttl_ms: 15_000,
            expires_in_ms: 11_200,
        };
        assert_eq!(l.describe(), "lease 12 s left (host-a pid 41)");
        l.expires_in_ms = -4_100;
        assert!(l.expired());
        assert_eq!(l.describe(), "lease expired 4 s ago (host-a pid 41)");
    }
}
