//! [`HelperJail`], the confinement of Latch's own git, on this machine's
//! kernel: it writes only where it is told, never reads the secrets under
//! the home directory, reaches no network and no Unix socket, and runs in
//! a session of its own, away from Latch's terminal.

use super::*;
use latch_sandbox::HelperJail;
use std::os::unix::net::UnixListener;

fn jailed(jail: &HelperJail, mut cmd: Command) -> Output {
    jail.confine(&mut cmd);
    cmd.output().unwrap()
}

#[test]
fn a_helper_writes_only_where_it_is_told_and_reads_no_secret() {
    let f = fixture();
    let writable = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".ssh")).unwrap();
    std::fs::write(home.path().join(".ssh/id_ed25519"), "KEY").unwrap();
    let jail = HelperJail::new(&[writable.path().to_path_buf()], Some(home.path())).unwrap();
    let inside = writable.path().join("ok");
    let o = jailed(&jail, named_probe("write", inside.to_str().unwrap()));
    assert!(o.status.success(), "{}", text(&o));
    for target in [
        f.ws.path().join("in-the-workspace"),
        f.outside.path().join("outside"),
    ] {
        let o = jailed(&jail, named_probe("write", target.to_str().unwrap()));
        assert!(!o.status.success(), "{}: {}", target.display(), text(&o));
        assert!(!target.exists());
    }
    let key = home.path().join(".ssh/id_ed25519");
    let o = jailed(&jail, named_probe("read", key.to_str().unwrap()));
    assert!(!o.status.success(), "{}", text(&o));
    let o = jailed(
        &jail,
        named_probe("read", f.ws.path().join("inside.txt").to_str().unwrap()),
    );
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn a_helper_reaches_no_network_and_no_unix_socket() {
    let writable = tempfile::tempdir().unwrap();
    let jail = HelperJail::new(&[writable.path().to_path_buf()], None).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let o = jailed(&jail, named_probe("connect", &format!("127.0.0.1:{port}")));
    assert!(!o.status.success(), "{}", text(&o));
    // A socket it could even write (in its writable directory): refused by
    // the filter, as the user's D-Bus or SSH agent would be.
    let socket = writable.path().join("agent.sock");
    let _unix = UnixListener::bind(&socket).unwrap();
    let o = jailed(&jail, named_probe("unix-connect", socket.to_str().unwrap()));
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("PROBE-ERR 13"), "EACCES: {}", text(&o));
    // And should the filter let a socket through, the network namespace is
    // its own (only a down loopback).
    let ours = std::fs::read_link("/proc/self/ns/net").unwrap();
    let mut cmd = Command::new("readlink");
    cmd.arg("/proc/self/ns/net");
    let o = jailed(&jail, cmd);
    assert!(o.status.success(), "{}", text(&o));
    let theirs = String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert_ne!(
        theirs,
        ours.to_string_lossy(),
        "a network namespace of its own"
    );
}

#[test]
fn a_helper_runs_in_its_own_session_without_a_terminal() {
    let writable = tempfile::tempdir().unwrap();
    let jail = HelperJail::new(&[writable.path().to_path_buf()], None).unwrap();
    let mut cmd = Command::new("sh");
    // The session id (field 6 of /proc/PID/stat) is the shell's own pid,
    // and it has no controlling terminal to open.
    cmd.arg("-c").arg(
        "set -- $(cat /proc/$$/stat); [ \"$6\" = \"$$\" ] || exit 3; \
         (exec 3</dev/tty) 2>/dev/null && exit 4; exit 0",
    );
    let o = jailed(&jail, cmd);
    assert!(o.status.success(), "{}", text(&o));
}
