//! Member leases on PostgreSQL: the heartbeat that renews the leases of the
//! members this process runs, on a connection of its own (outside the pool
//! and the agent loops, so a busy pool or a long tool call never starves
//! it), and the lease rows themselves.
//!
//! A lease row (`latch_group_leases`: member, epoch, host, pid, TTL,
//! expiry) is written with the member's join, in its transaction; expiry is
//! the server's clock (`clock_timestamp()`), never a member's. A renewal
//! moves the expiry a TTL past the server's now, only while it has not
//! passed: once expired a lease is over, even before a commit removes its
//! member. The heartbeat marks a lease lost (its [`LeaseWatch`]) when a
//! renewal finds it gone or over, or when no renewal reached the store for
//! a whole TTL since the last one it confirmed (measured from when that
//! renewal was sent, so the member gives up no later than the server does).

use crate::connect::Target;
use latch_kernel::group::LeaseWatch;
use std::sync::{Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// One lease this process renews.
struct Held {
    root: String,
    member: String,
    epoch: u64,
    ttl: Duration,
    watch: Weak<LeaseWatch>,
    /// When the last renewal the store confirmed was sent.
    renewed: Instant,
}

/// The leases this process renews for one store.
#[derive(Default)]
pub(crate) struct Leases {
    held: Mutex<Vec<Held>>,
    changed: Notify,
    /// Off: renewals stop (tests of a member whose process hangs).
    paused: std::sync::atomic::AtomicBool,
}

impl Leases {
    /// Renew `member`'s lease of `root`'s group at `epoch` from now on,
    /// for as long as the returned watch (or a clone) lives and the lease
    /// is not lost; `taken` is when the lease's expiry was set. A member
    /// already renewed here at that epoch keeps its watch (two holders in
    /// one process — the lead reconciling a child, the child itself —
    /// share one lease).
    pub(crate) fn hold(
        &self,
        root: &str,
        member: &str,
        epoch: u64,
        ttl: Duration,
        taken: Instant,
    ) -> std::sync::Arc<LeaseWatch> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(h) = held
            .iter_mut()
            .find(|h| h.root == root && h.member == member && h.epoch == epoch)
            && let Some(watch) = h.watch.upgrade()
            && watch.lost().is_none()
        {
            h.renewed = h.renewed.max(taken);
            return watch;
        }
        held.retain(|h| !(h.root == root && h.member == member));
        let watch = LeaseWatch::new();
        held.push(Held {
            root: root.to_string(),
            member: member.to_string(),
            epoch,
            ttl,
            watch: std::sync::Arc::downgrade(&watch),
            renewed: taken,
        });
        drop(held);
        self.changed.notify_one();
        watch
    }

    /// Stop renewing `member`'s lease of `root`'s group (it left).
    pub(crate) fn drop_lease(&self, root: &str, member: &str) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.retain(|h| !(h.root == root && h.member == member));
    }

    /// Stop or resume renewing every lease (a test's hung process).
    pub(crate) fn pause(&self, paused: bool) {
        self.paused
            .store(paused, std::sync::atomic::Ordering::SeqCst);
        self.changed.notify_one();
    }

    /// The leases to renew now (those whose watch is gone are dropped),
    /// and how long until the next renewal is due.
    fn due(&self) -> (Vec<(String, String, i64)>, Duration) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.retain(|h| h.watch.strong_count() > 0);
        let every = held
            .iter()
            .map(|h| h.ttl / 3)
            .min()
            .unwrap_or(Duration::from_secs(1))
            .max(Duration::from_millis(50));
        (
            held.iter()
                .map(|h| (h.root.clone(), h.member.clone(), h.epoch as i64))
                .collect(),
            every,
        )
    }

    /// The renewal sent at `sent` came back: the leases in `renewed` hold,
    /// the other ones asked for are gone or over.
    fn confirmed(
        &self,
        asked: &[(String, String, i64)],
        renewed: &[(String, String)],
        sent: Instant,
    ) {
        let mut lost = Vec::new();
        {
            let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
            held.retain_mut(|h| {
                let was_asked = asked
                    .iter()
                    .any(|(r, m, e)| *r == h.root && *m == h.member && *e == h.epoch as i64);
                if !was_asked {
                    return true;
                }
                if renewed.iter().any(|(r, m)| *r == h.root && *m == h.member) {
                    h.renewed = h.renewed.max(sent);
                    return true;
                }
                lost.push(h.watch.clone());
                false
            });
        }
        for w in lost.into_iter().filter_map(|w| w.upgrade()) {
            w.lose(
                "the group store no longer holds this member's lease (it expired on the \
                 store's clock, or the member was removed or evicted)",
            );
        }
    }

    /// Mark lost every lease no confirmed renewal kept alive for its TTL.
    fn expire_locally(&self) {
        let now = Instant::now();
        let mut lost = Vec::new();
        {
            let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
            held.retain(|h| {
                if now.duration_since(h.renewed) < h.ttl {
                    return true;
                }
                lost.push((h.watch.clone(), h.ttl));
                false
            });
        }
        for (w, ttl) in lost {
            if let Some(w) = w.upgrade() {
                w.lose(&format!(
                    "no lease renewal reached the group store for {} s, its TTL: the store \
                     is unreachable or too slow, so this member's lease may have expired there",
                    ttl.as_secs_f64()
                ));
            }
        }
    }
}

const RENEW: &str = "UPDATE latch_group_leases l
    SET expires_at = clock_timestamp() + l.ttl_ms * interval '1 millisecond'
    FROM unnest($1::text[], $2::text[], $3::bigint[]) AS h(root, member, epoch)
    WHERE l.root = h.root AND l.member = h.member AND l.epoch = h.epoch
      AND l.expires_at > clock_timestamp()
    RETURNING l.root, l.member";

/// Renew the held leases until the runtime stops, on a connection of its
/// own (made again when it fails).
pub(crate) async fn heartbeat(target: Target, leases: std::sync::Arc<Leases>) {
    let mut client: Option<tokio_postgres::Client> = None;
    loop {
        let (asked, every) = leases.due();
        let paused = leases.paused.load(std::sync::atomic::Ordering::SeqCst);
        if !asked.is_empty() && !paused {
            if client.as_ref().is_none_or(|c| c.is_closed()) {
                client = tokio::time::timeout(every, crate::connect::connect(&target))
                    .await
                    .ok()
                    .and_then(Result::ok);
            }
            if let Some(c) = &client {
                let sent = Instant::now();
                let roots: Vec<&str> = asked.iter().map(|a| a.0.as_str()).collect();
                let members: Vec<&str> = asked.iter().map(|a| a.1.as_str()).collect();
                let epochs: Vec<i64> = asked.iter().map(|a| a.2).collect();
                match tokio::time::timeout(every, c.query(RENEW, &[&roots, &members, &epochs]))
                    .await
                {
                    Ok(Ok(rows)) => {
                        let renewed: Vec<(String, String)> =
                            rows.iter().map(|r| (r.get(0), r.get(1))).collect();
                        leases.confirmed(&asked, &renewed, sent);
                    }
                    // A failed or stalled renewal: a fresh connection next.
                    _ => client = None,
                }
            }
        }
        leases.expire_locally();
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = leases.changed.notified() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_lease_nobody_renews_for_a_ttl_is_lost_locally() {
        let leases = Leases::default();
        let ttl = Duration::from_millis(30);
        let watch = leases.hold("r", "m", 4, ttl, Instant::now());
        leases.expire_locally();
        assert_eq!(watch.lost(), None);
        std::thread::sleep(ttl);
        leases.expire_locally();
        assert!(watch.lost().unwrap().contains("no lease renewal"));
    }

    #[test]
    fn a_renewal_that_does_not_return_a_lease_loses_it() {
        let leases = Leases::default();
        let ttl = Duration::from_secs(10);
        let kept = leases.hold("r", "a", 1, ttl, Instant::now());
        let gone = leases.hold("r", "b", 2, ttl, Instant::now());
        assert!(
            Arc::ptr_eq(&kept, &leases.hold("r", "a", 1, ttl, Instant::now())),
            "one lease per member and epoch in a process"
        );
        let (asked, every) = leases.due();
        assert_eq!(asked.len(), 2);
        assert!(every <= ttl / 3);
        leases.confirmed(&asked, &[("r".into(), "a".into())], Instant::now());
        assert_eq!(kept.lost(), None);
        assert!(gone.lost().unwrap().contains("no longer holds"));
        // A member whose handle went is no longer renewed.
        drop(kept);
        assert!(leases.due().0.is_empty());
    }
}
