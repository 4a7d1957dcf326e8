// Plan mode on the page: the mode control in the header (plan → edits →
// auto as Shift+Tab cycles in the terminal; ask and never ask too), the
// plan the model proposed as a dialog to approve into a mode or send back
// with feedback, and the task state's actions as the plan's checklist.
"use strict";

// The label the server reduces (`d.mode`) → the mode id the control sends.
const MODE_IDS = { "plan": "plan", "edits": "edits", "auto": "on-request", "ask": "untrusted", "never ask": "never" };
const MODE_CHOICES = [["plan", "Plan"], ["edits", "Edits"], ["on-request", "Auto"], ["untrusted", "Ask"], ["never", "Never ask"]];

// Switch the open session's mode; the new mode comes back on the stream.
async function switchMode(mode) {
  if (!current) { notice("Pick or start a session first: the mode belongs to a session"); return; }
  const r = await api("/sessions/" + current + "/mode", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ mode }),
  });
  renderMode(r.mode);
  scheduleRefresh();
}

// `/plan`: into plan mode, or out of it into the approval mode it had.
async function togglePlan(d) {
  const label = (d && d.mode) || "";
  if (label === "plan") {
    const select = $("mode");
    const back = select.dataset.approval || "on-request";
    await switchMode(back);
  } else {
    $("mode").dataset.approval = MODE_IDS[label] || "on-request";
    await switchMode("plan");
  }
}

function renderMode(label) {
  const select = $("mode");
  if (!select) return;
  const id = MODE_IDS[label];
  if (id && id !== "plan") select.dataset.approval = id;
  select.value = id || "";
  select.dataset.mode = label || "";
  document.body.classList.toggle("plan-mode", label === "plan");
}

// The task state's actions as a checklist: [x] done, [ ] to do.
function renderChecklist(steps) {
  const box = $("checklist");
  if (!box) return;
  box.replaceChildren();
  if (!steps || !steps.length) { box.appendChild(el("div", "kv dim", "no plan yet")); return; }
  steps.forEach((s) => box.appendChild(el("div", "kv step" + (s.done ? " done" : ""), (s.done ? "[x] " : "[ ] ") + s.text)));
}

// The proposed plan, in full, with the modes to approve it into and a
// way back to planning with feedback for the model.
function renderPlanApproval(box, request) {
  box.appendChild(el("div", "title", "The model proposes a plan; approving it leaves plan mode"));
  const pre = el("pre", "plan");
  pre.id = "plan-text";
  (request.plan || "").split("\n").forEach((line) => pre.appendChild(el("div", "", line)));
  box.appendChild(pre);
  const feedback = el("input", "reason");
  feedback.id = "permission-reason";
  feedback.placeholder = "feedback to keep planning (optional)";
  const post = (body) => async () => {
    box.querySelectorAll("button").forEach((b) => { b.disabled = true; });
    try {
      await api("/sessions/" + current + "/permissions/" + encodeURIComponent(request.call_id), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    } catch (_) {
      box.querySelectorAll("button").forEach((b) => { b.disabled = false; });
    }
  };
  const row = el("div", "answers");
  [["edits", "Approve, edits"], ["on-request", "Approve, auto"], ["untrusted", "Approve, ask"]].forEach(([mode, label]) => {
    const b = el("button", "answer-allow", label);
    b.type = "button";
    b.id = "plan-approve-" + mode;
    b.addEventListener("click", post({ decision: "approve", mode }));
    row.appendChild(b);
  });
  const keep = el("button", "answer-deny", "Keep planning");
  keep.type = "button";
  keep.id = "plan-keep";
  keep.addEventListener("click", () => post({ decision: "deny", reason: feedback.value || null })());
  row.appendChild(keep);
  row.appendChild(feedback);
  box.appendChild(row);
}

// `/agents`: the agents users defined, as `latch agents` lists them.
async function showAgents() {
  const r = await api("/agents");
  panel("agents", "Agents users defined", r.lines.map((l) => el("div", l.startsWith("  ") ? "kv dim" : "kv", l)));
}

function setupModeControl() {
  const select = $("mode");
  if (!select) return;
  MODE_CHOICES.forEach(([id, label]) => {
    const o = el("option", "", label);
    o.value = id;
    select.appendChild(o);
  });
  select.value = "";
  select.addEventListener("change", () => {
    switchMode(select.value).catch(() => renderMode(select.dataset.mode));
  });
}
