//! Separate hosts on one machine: a network namespace per member process,
//! joined to the root namespace by a veth pair, where a relay to the test
//! cluster listens on the pair's root-side address — or, where namespaces
//! cannot be made, a plain process and a loopback relay. A site's link can
//! go silent (down on both ends: packets dropped, no FIN) and come back.

use super::relay::{Relay, Target};
use super::worker;
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Child, Command};

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// A network namespace deleted on drop.
pub struct Netns(pub String);

impl Netns {
    /// `None` when namespaces cannot be made here (or
    /// `LATCH_TEST_NO_NETNS=1` asks to run as if they could not).
    pub fn create(name: String) -> Option<Netns> {
        if std::env::var("LATCH_TEST_NO_NETNS").as_deref() == Ok("1")
            || !ip(&["netns", "add", &name])
        {
            return None;
        }
        ip(&["netns", "exec", &name, "ip", "link", "set", "lo", "up"]);
        Some(Netns(name))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        ip(&["netns", "del", &self.0]);
    }
}

/// One member host: its namespace and link (when they could be made) and
/// the relay its members reach the cluster through.
pub struct Site {
    ns: Option<Netns>,
    /// The veth ends: root side, namespace side.
    veth: Option<(String, String)>,
    relay: Relay,
    /// The address members of this site connect to.
    host: String,
}

impl Site {
    /// Site `n` of this process, relaying to the cluster's `socket`.
    pub fn new(n: u8, socket: PathBuf) -> Site {
        let pid = std::process::id();
        let made = Netns::create(format!("latch-x-{pid}-{n}")).and_then(|ns| {
            let (h, p) = (
                format!("lxh{}{n}", pid % 100_000),
                format!("lxn{}{n}", pid % 100_000),
            );
            // A /30 of its own per process and site.
            let (b, c) = (200 + (pid % 50) as u8, ((pid / 50) % 250) as u8);
            let base = 4 * n;
            let (root_ip, ns_ip) = (
                format!("10.{b}.{c}.{}", base + 1),
                format!("10.{b}.{c}.{}", base + 2),
            );
            let ok = ip(&["link", "add", &h, "type", "veth", "peer", "name", &p])
                && ip(&["link", "set", &p, "netns", &ns.0])
                && ip(&["addr", "add", &format!("{root_ip}/30"), "dev", &h])
                && ip(&["link", "set", &h, "up"])
                && ip(&[
                    "netns",
                    "exec",
                    &ns.0,
                    "ip",
                    "addr",
                    "add",
                    &format!("{ns_ip}/30"),
                    "dev",
                    &p,
                ])
                && ip(&["netns", "exec", &ns.0, "ip", "link", "set", &p, "up"]);
            if !ok {
                ip(&["link", "del", &h]);
                return None;
            }
            Some((ns, (h, p), root_ip))
        });
        match made {
            Some((ns, veth, root_ip)) => Site {
                relay: Relay::start_at(&format!("{root_ip}:0"), Target::Unix(socket)),
                ns: Some(ns),
                veth: Some(veth),
                host: root_ip,
            },
            None => Site {
                relay: Relay::start_at("127.0.0.1:0", Target::Unix(socket)),
                ns: None,
                veth: None,
                host: "127.0.0.1".into(),
            },
        }
    }

    /// True when the site is a namespace of its own.
    pub fn isolated(&self) -> bool {
        self.ns.is_some()
    }

    /// The connection string a member of this site uses.
    pub fn url(&self, user: &str, dbname: &str) -> String {
        format!(
            "host={} port={} user={user} dbname={dbname}",
            self.host, self.relay.port
        )
    }

    /// Run a worker on `job` at this site.
    pub fn spawn(&self, job: &Value) -> Child {
        worker::spawn_in(job, self.ns.as_ref().map(|n| n.0.as_str()))
    }

    /// The link goes silent: nothing passes, nothing is closed.
    pub fn go_silent(&self) {
        match (&self.veth, &self.ns) {
            (Some((h, p)), Some(ns)) => {
                assert!(ip(&["link", "set", h, "down"]));
                assert!(ip(&[
                    "netns", "exec", &ns.0, "ip", "link", "set", p, "down"
                ]));
            }
            _ => self.relay.stall(true),
        }
    }

    /// The link is back.
    pub fn come_back(&self) {
        match (&self.veth, &self.ns) {
            (Some((h, p)), Some(ns)) => {
                assert!(ip(&["link", "set", h, "up"]));
                assert!(ip(&["netns", "exec", &ns.0, "ip", "link", "set", p, "up"]));
            }
            _ => self.relay.stall(false),
        }
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        if let Some((h, _)) = &self.veth {
            ip(&["link", "del", h]);
        }
    }
}
