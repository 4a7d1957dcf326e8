//! `latch sandbox check` on this machine: every probe of its self-test is
//! refused, the Unix-socket connect outside the workspace among them (a
//! listener the check starts itself), `TIOCSTI`, the controlling terminal
//! and a `setsid` child that would outlive its command, and the check says
//! the sandbox holds.

use super::latch;

#[test]
fn sandbox_check_refuses_every_probe_the_terminal_and_survivors_among_them() {
    let ws = tempfile::tempdir().unwrap();
    let out = latch(ws.path())
        .args(["sandbox", "check"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let all = format!("{stdout}\nstderr: {}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{all}");
    let unix = stdout
        .lines()
        .find(|l| l.contains("Unix socket connect outside the workspace"))
        .unwrap_or_else(|| panic!("no Unix socket probe: {all}"));
    assert!(
        unix.contains("✓ refused") && unix.contains(".sock") && unix.contains("Permission denied"),
        "{unix}"
    );
    assert_eq!(stdout.matches("✓ refused").count(), 7, "{all}");
    // The terminal: TIOCSTI refused by the filter, no controlling terminal.
    for (probe, answer) in [
        ("TIOCSTI", "Operation not permitted"),
        ("open the controlling terminal", "No such device or address"),
        (
            "a setsid child outliving its command",
            "stopped with its command",
        ),
    ] {
        let line = stdout
            .lines()
            .find(|l| l.contains(probe))
            .unwrap_or_else(|| panic!("no `{probe}` probe: {all}"));
        assert!(
            line.contains("✓ refused") && line.contains(answer),
            "{line}"
        );
    }
    assert!(!stdout.contains("ALLOWED"), "{all}");
    assert!(
        stdout.contains("the sandbox holds on this machine"),
        "{all}"
    );
}
