"""The canonical renderings the host holds every view to, in Python.

`wit/context.wit` states them in prose; the Rust SDK implements them in
`sdk/src/validate/canon.rs`. An engine in another language writes them out
itself, byte for byte:

* the session-context message,
* the conversation message of one durable event,
* the elided form of a tool result (observation masking),
* the message of a kernel-context entry, and the frame the host puts around
  its text (which counts toward the hard budget),
* the rendering of the canonical task state this engine pins as kernel context.
"""

import math

from wit_world.imports import types as t

#: Tokens the canonical estimator charges every message for role and framing.
MESSAGE_OVERHEAD = 4
#: Tokens it charges every tool-call or tool-result part for framing.
TOOL_PART_OVERHEAD = 4
#: Tokens of an image whose dimensions are unknown.
UNKNOWN_IMAGE_TOKENS = 1600
#: Most entries of one state section the snapshot shows (the newest ones).
SECTION_LIMIT = 12
#: Longest line of state text, in characters.
LINE_LIMIT = 400


def session_context_text(ctx):
    """`# Session`, the workspace and mode, then the repository instructions."""
    text = f"# Session\nWorkspace: {ctx.workspace}\nMode: {ctx.mode}\n"
    if ctx.repository_instructions:
        text += "\n# Repository instructions\n" + ctx.repository_instructions
    return text


def user_text(text):
    """A user message of one text part that cites no event (the session context)."""
    return t.Message(role=t.Role.USER, parts=[t.Part_Text(text)], kernel=None, source_seqs=[])


def kernel_message(entry, seq):
    """The message of a kernel-context entry; `seq` is None until it is persisted."""
    tag = t.KernelTag(generation=entry.generation, revision=entry.revision, kind=entry.kind, seq=seq)
    return t.Message(
        role=t.Role.USER,
        parts=[t.Part_Text(entry.text)],
        kernel=tag,
        source_seqs=[] if seq is None else [seq],
    )


#: The wire names of the kernel-context kinds, as the frame spells them.
KIND_NAMES = {
    t.KernelContextKind.SNAPSHOT: "snapshot",
    t.KernelContextKind.STATE_UPDATE: "state-update",
    t.KernelContextKind.EXTENSION: "extension",
    t.KernelContextKind.RECALL: "recall",
    t.KernelContextKind.ARCHIVE_INDEX: "archive-index",
    t.KernelContextKind.REGROUND: "reground",
}
FRAME_TAG = "latch-kernel-context"


def framed_text(kind, text):
    """Kernel-context text as the provider receives it; a kernel-context
    message is priced as this (the frame counts toward the hard budget)."""
    escaped = text.replace("</" + FRAME_TAG, "<\\/" + FRAME_TAG)
    return (
        f'<{FRAME_TAG} kind="{KIND_NAMES[kind]}" author="context engine, not the user">\n'
        f"{escaped}\n</{FRAME_TAG}>"
    )


def elision_marker(tokens):
    """The content that replaces an elided tool result."""
    return f"[output elided: ≈{tokens} tokens; `recall` reaches it]"


def event_message(event, elided_tokens=None):
    """The message a conversation event renders, or None for bookkeeping.

    With `elided_tokens` set, a tool result is sent in its elided form: same
    call id, name and error flag, no images, the marker as content.
    """
    body = event.body
    if isinstance(body, t.EventBody_UserMessage):
        role, parts = t.Role.USER, list(body.value)
    elif isinstance(body, t.EventBody_AssistantMessage):
        role, parts = t.Role.ASSISTANT, list(body.value)
    elif isinstance(body, t.EventBody_Notification):
        role, parts = t.Role.USER, [t.Part_Text(body.value)]
    elif isinstance(body, t.EventBody_ToolResult):
        result = body.value
        if elided_tokens is not None:
            result = t.ToolResult(
                call_id=result.call_id,
                name=result.name,
                content=elision_marker(elided_tokens),
                is_error=result.is_error,
                images=[],
            )
        role, parts = t.Role.USER, [t.Part_ToolResult(result)]
    else:
        return None
    return t.Message(role=role, parts=parts, kernel=None, source_seqs=[event.seq])


def image_tokens(width, height):
    """Visual tokens of an image, from its pixel dimensions (the SDK's rule)."""
    if width is None or height is None or width == 0 or height == 0:
        return UNKNOWN_IMAGE_TOKENS
    w, h = float(width), float(height)
    long_side = max(w, h)
    if long_side > 1568.0:
        s = 1568.0 / long_side
        w, h = w * s, h * s
    area = w * h
    if area > 1_150_000.0:
        s = math.sqrt(1_150_000.0 / area)
        w, h = w * s, h * s
    tokens = math.ceil((math.floor(w) * math.floor(h)) / 750.0)
    return min(max(tokens, 1), UNKNOWN_IMAGE_TOKENS)


def message_images(message):
    """(count, tokens) of the images a message shows."""
    count = tokens = 0
    for part in message.parts:
        if isinstance(part, t.Part_Image):
            images = [part.value]
        elif isinstance(part, t.Part_ToolResult):
            images = part.value.images
        else:
            images = []
        for m in images:
            count += 1
            tokens += image_tokens(m.width, m.height)
    return count, tokens


def _line(text):
    text = " ".join(text.split())
    return text if len(text) <= LINE_LIMIT else text[: LINE_LIMIT - 1] + "…"


def state_text(state):
    """The canonical task state as the snapshot's first section.

    Rejected hypotheses are listed as rejected, with the reason, and never
    among the open ones. Each section shows its newest entries.
    """
    out = ["# Task state"]

    def section(title, lines):
        lines = [_line(x) for x in lines if x.strip()]
        if lines:
            out.append(f"{title}:")
            out.extend(f"- {x}" for x in lines[-SECTION_LIMIT:])

    if state.goal is not None and state.goal.text.strip():
        out.append(f"Goal: {_line(state.goal.text)}")
    section("Constraints", [e.text for e in state.constraints])
    section("Decisions", [e.text for e in state.decisions])
    section("Completion criteria", [e.text for e in state.criteria])
    section(
        "Open hypotheses",
        [h.text for h in state.hypotheses if h.status == t.HypothesisStatus.ACTIVE],
    )
    section(
        "Rejected hypotheses (do not pursue)",
        [
            f"{h.text} (rejected: {h.reason or 'no reason recorded'})"
            for h in state.hypotheses
            if h.status == t.HypothesisStatus.REJECTED
        ],
    )
    section("Disproved", [e.text for e in state.disproofs])
    section(
        "Evidence",
        [
            f"{e.requirement}: `{e.command}` "
            f"{'passed' if e.outcome == t.ValidationOutcome.PASSED else 'failed'}"
            f"{' (stale: the workspace changed since)' if e.stale else ''}"
            for e in state.evidence
        ],
    )
    section("Validations", [e.text for e in state.validations])
    section("Active failures", [f"{f.summary} (×{f.count})" for f in state.failures])
    section("Open questions", [e.text for e in state.questions])
    section("Next actions", [e.text for e in state.actions])
    section("Files", [f.path for f in state.files])
    section("Notes", [e.text for e in state.notes])
    if len(out) == 1:
        out.append("(nothing recorded yet)")
    return "\n".join(out)
