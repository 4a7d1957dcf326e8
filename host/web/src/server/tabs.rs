//! The link `latch serve` prints, and the tabs it opens. A link
//! (`/#token=CODE`) is good for one tab: the page exchanges its code, once,
//! for a credential of its own (`POST /api/tab`), keeps that in the tab's
//! `sessionStorage` and drops the code from the address bar. A link found
//! later — in the browser's history, a synced profile, a screenshot — opens
//! nothing, and no API route accepts a code as a credential.
//!
//! A tab's credential is `tab.ID.MAC`: a random id and its HMAC-SHA256
//! under the server's secret (the token kept per workspace), so it stays
//! valid across restarts of `latch serve` until `--new-token` replaces the
//! secret, and the server keeps no list of tabs. Scripts present the
//! secret itself, which never appears in a URL.
//!
//! Each time a link is used, the server makes the next one ([`Links`]
//! announces it; `latch serve` prints it), so the terminal always shows a
//! link that still opens a tab.

use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256};
use std::collections::VecDeque;
use std::sync::Mutex;

/// How many used codes are remembered, to tell a reused link from a
/// mistyped one.
const REMEMBERED: usize = 1_000;

/// Why a code was not exchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Redeem {
    /// The code opened a tab already.
    Used,
    /// No link has this code.
    Unknown,
}

/// What is told the next link's code once one is used.
type Announce = Box<dyn Fn(&str) + Send + Sync>;

/// The links of one server: codes not used yet, and those used.
pub struct Links {
    state: Mutex<LinkState>,
    announce: Mutex<Option<Announce>>,
}

#[derive(Default)]
struct LinkState {
    unused: Vec<String>,
    /// SHA-256 of used codes, newest last.
    used: VecDeque<[u8; 32]>,
}

impl std::fmt::Debug for Links {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        f.debug_struct("Links")
            .field("unused", &state.unused.len())
            .field("used", &state.used.len())
            .finish()
    }
}

impl Default for Links {
    fn default() -> Self {
        Links::new()
    }
}

impl Links {
    /// No link yet.
    pub fn new() -> Links {
        Links {
            state: Mutex::new(LinkState::default()),
            announce: Mutex::new(None),
        }
    }

    /// Call `announce` with the next link's code each time one is used.
    pub fn on_use(&self, announce: impl Fn(&str) + Send + Sync + 'static) {
        *self.announce.lock().unwrap_or_else(|p| p.into_inner()) = Some(Box::new(announce));
    }

    /// A new link's code, good for one tab.
    pub fn mint(&self) -> String {
        let code = random_hex();
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .unused
            .push(code.clone());
        code
    }

    /// Use the link `code` (once): Ok, and the next link is announced.
    pub fn redeem(&self, code: &str) -> Result<(), Redeem> {
        let found = {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            match state.unused.iter().position(|c| same(c, code)) {
                Some(i) => {
                    state.unused.swap_remove(i);
                    if state.used.len() >= REMEMBERED {
                        state.used.pop_front();
                    }
                    state.used.push_back(Sha256::digest(code.as_bytes()).into());
                    Ok(())
                }
                None => {
                    let digest: [u8; 32] = Sha256::digest(code.as_bytes()).into();
                    Err(if state.used.contains(&digest) {
                        Redeem::Used
                    } else {
                        Redeem::Unknown
                    })
                }
            }
        };
        if found.is_ok()
            && let Some(announce) = self
                .announce
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
        {
            announce(&self.mint());
        }
        found
    }
}

/// A new tab's credential under `secret`.
pub fn tab_credential(secret: &str) -> String {
    let id = random_hex();
    let mac = hex::encode(hmac_sha256(secret.as_bytes(), id.as_bytes()));
    format!("tab.{id}.{mac}")
}

/// True when `credential` is a tab credential made under `secret`.
pub fn valid_tab_credential(secret: &str, credential: &str) -> bool {
    let Some(rest) = credential.strip_prefix("tab.") else {
        return false;
    };
    let Some((id, mac)) = rest.split_once('.') else {
        return false;
    };
    let expected = hex::encode(hmac_sha256(secret.as_bytes(), id.as_bytes()));
    same(&expected, mac)
}

/// Equal in time independent of where the strings differ.
fn same(a: &str, b: &str) -> bool {
    super::auth::same(a, b)
}

fn random_hex() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// HMAC-SHA256 (RFC 2104) of `message` under `key`.
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut mac =
        hmac::Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(message);
    mac.finalize().into_bytes().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test cases 1 and 6 (a key longer than the block).
        assert_eq!(
            hex::encode(hmac_sha256(&[0x0b; 20], b"Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        assert_eq!(
            hex::encode(hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn a_link_opens_one_tab_and_the_next_is_announced() {
        let links = Links::new();
        let announced = std::sync::Arc::new(Mutex::new(Vec::new()));
        let seen = announced.clone();
        links.on_use(move |code| seen.lock().unwrap().push(code.to_string()));
        let code = links.mint();
        assert_eq!(links.redeem(&code), Ok(()));
        assert_eq!(links.redeem(&code), Err(Redeem::Used));
        assert_eq!(links.redeem("0123"), Err(Redeem::Unknown));
        let next = announced.lock().unwrap().clone();
        assert_eq!(next.len(), 1);
        assert_ne!(next[0], code);
        assert_eq!(links.redeem(&next[0]), Ok(()));
    }

    #[test]
    fn a_tab_credential_holds_under_its_secret_only() {
        let c = tab_credential("s1");
        assert!(valid_tab_credential("s1", &c));
        assert!(!valid_tab_credential("s2", &c));
        let forged = format!("{}0", &c[..c.len() - 1]);
        assert!(!valid_tab_credential("s1", &forged));
        assert!(!valid_tab_credential("s1", "s1"));
        assert_ne!(tab_credential("s1"), c, "every tab has its own");
    }
}
