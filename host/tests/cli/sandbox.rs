//! `latch sandbox check` on this machine: every probe of its self-test is
//! refused, the Unix-socket connect outside the workspace among them (a
//! listener the check starts itself), `TIOCSTI`, the controlling terminal
//! and a `setsid` child that would outlive its command, and the check says
//! the sandbox holds. Run from a terminal (tmux), the probes still find no
//! controlling terminal.

use super::latch;
use super::tui::{Tmux, command_line};

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

#[test]
fn sandbox_check_on_a_terminal_finds_no_controlling_terminal_in_its_probes() {
    // Latch itself has the pane's terminal; its commands must not.
    let ws = tempfile::tempdir().unwrap();
    let tmux = Tmux::new();
    tmux.start(
        "check",
        &command_line(&latch(ws.path()), &["sandbox", "check"]),
    );
    tmux.wait_for("check", &["a setsid child outliving its command"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !tmux.exited("check") {
        assert!(
            std::time::Instant::now() < deadline,
            "the check never ended"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let screen = tmux.screen("check").join("\n");
    let line = screen
        .lines()
        .find(|l| l.contains("open the controlling terminal"))
        .unwrap_or_else(|| panic!("no controlling-terminal probe: {screen}"));
    assert!(
        line.contains("✓ refused") && line.contains("No such device or address"),
        "{screen}"
    );
    assert!(
        screen.contains("the sandbox holds on this machine"),
        "{screen}"
    );
}
