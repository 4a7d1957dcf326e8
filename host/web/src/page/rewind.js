// Rewind from Latch's page: each user message has a Rewind button that
// shows what putting the files back to their state before it would do now
// (files restored or removed, and files changed outside Latch, which are
// left alone), and asks to confirm. The server runs the same rewind as
// `latch rewind` and `/rewind`: new durable events, history kept, the
// `rewound` note in the transcript. Loaded before app.js, whose helpers
// ($, el, api, panel, notice, current) it calls.
"use strict";

function rewindRows(plan) {
  const rows = [];
  plan.restore.forEach((p) => rows.push(el("div", "rw restore", "restore " + p)));
  plan.remove.forEach((p) => rows.push(el("div", "rw remove", "remove " + p + " (it did not exist then)")));
  const links = plan.links || [];
  plan.conflicts.forEach((p) => rows.push(el("div", "rw conflict",
    "left alone " + p + ": " + (links.includes(p)
      ? "a symbolic link (or a directory) stands where the file was; Latch never writes through a link"
      : "changed outside Latch since Latch last wrote it") + "; restore it by hand")));
  if (!rows.length) rows.push(el("div", "dim", "nothing to restore: the files are as they were"));
  return rows;
}

// Show what a rewind to before the user message `seq` would do, and ask.
async function rewindTo(seq, text) {
  const id = current;
  const plan = await api("/sessions/" + id + "/rewind/" + seq);
  const short = text.length > 60 ? text.slice(0, 59) + "…" : text;
  const title = "Rewind files to before “" + short + "”";
  const body = rewindRows(plan);
  if (!plan.restore.length && !plan.remove.length) {
    panel("rewind", title, body);
    return;
  }
  const row = el("div", "answers");
  const go = el("button", "confirm", "Rewind files");
  go.type = "button";
  go.id = "rewind-confirm";
  const cancel = el("button", "", "Cancel");
  cancel.type = "button";
  row.append(go, cancel);
  body.push(row);
  const p = panel("rewind", title, body);
  cancel.addEventListener("click", () => p.remove());
  go.addEventListener("click", async () => {
    go.disabled = true;
    cancel.disabled = true;
    try {
      const done = await api("/sessions/" + id + "/rewind/" + seq, { method: "POST" });
      const n = done.restore.length + done.remove.length;
      panel("rewind", "Rewound " + n + " file" + (n === 1 ? "" : "s") + " to before “" + short + "”", rewindRows(done));
      scheduleRefresh();
    } catch (_) {
      go.disabled = false;
      cancel.disabled = false;
    }
  });
  go.focus();
}
