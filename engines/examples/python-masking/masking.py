"""Observation masking in cache epochs: what a view holds, as a function of the log.

An epoch starts with a snapshot entry (kernel context) that carries the
canonical task state and one line saying where working memory starts and
which tool output is elided::

    Epoch 3, started because working memory reached 6100 tokens, over its
    6000-token mark. Conversation from event 812 is shown; tool output before
    event 840 is elided (`recall` reaches it).

The view of an epoch is the session context, the snapshot, every whole
conversation unit from the epoch start (tool results older than the masking
boundary in their elided form) and, in log order, every state update the
engine persisted since. Everything is read back from the log, so a fresh
instance rebuilds exactly the view a warm one holds, and within an epoch a
view only appends (the provider's prefix cache holds).

A rotation starts a new epoch when working memory passes its high-water mark
(the request's `recent-tokens`, or the `recent_tokens` setting) or the view
no longer fits: it keeps the newest whole units up to `retain_percent` of
the mark (hysteresis: the next rotation is far away) and elides every tool
result but the newest `keep_results`.
"""

import re

from wit_world.imports import estimator
from wit_world.imports import types as t

import render
from log import units

WORKING_MEMORY = "\n\n# Working memory\n"
_LINE = re.compile(
    r"Epoch (\d+), started because (.+)\. Conversation from event (\d+) is shown; "
    r"tool output before event (\d+) is elided"
)
#: Most strings one estimator call is given (the host allows 10,000).
EST_CHUNK = 4000


class BudgetExceeded(Exception):
    """The view cannot fit the hard budget; carries the reason for the user."""


class Pricer:
    """Prices text with the host's canonical estimator, batching calls."""

    def __init__(self, log):
        self.log = log
        self.marker_by_digits = {}

    def texts(self, texts):
        out = []
        for i in range(0, len(texts), EST_CHUNK):
            out.extend(estimator.estimate(self.log.profile, texts[i : i + EST_CHUNK]))
        return out

    def message(self, text):
        """Price of a user message of one text part."""
        return render.MESSAGE_OVERHEAD + self.texts([text])[0]

    def kernel(self, kind, text):
        """Price of a kernel-context message of `kind`: its framed text."""
        return render.MESSAGE_OVERHEAD + self.texts([render.framed_text(kind, text)])[0]

    def _marker(self, n):
        # Digits cost the same whatever they are, so the marker's price
        # depends only on how many digits N has.
        d = len(str(n))
        if d not in self.marker_by_digits:
            self.marker_by_digits[d] = self.texts([render.elision_marker(10 ** (d - 1))])[0]
        return self.marker_by_digits[d]

    def prepare_elided(self, outlined):
        """Price the elided form of every tool result in `outlined` not priced yet.

        An outlined result's price is 8 + est(call id) + N, where N (content
        plus images) is what the marker names.
        """
        todo = [
            e
            for e in outlined
            if isinstance(e.body, t.EventBody_ToolResult) and e.seq not in self.log.elided
        ]
        ids = self.texts([e.body.value.call_id for e in todo])
        for e, id_tokens in zip(todo, ids):
            frame = render.MESSAGE_OVERHEAD + render.TOOL_PART_OVERHEAD + id_tokens
            n = self.log.price[e.seq] - frame
            self.log.elided[e.seq] = (n, frame + self._marker(n))

    def event(self, e, boundary):
        """Price of a conversation event, elided when it is a result before `boundary`."""
        if isinstance(e.body, t.EventBody_ToolResult) and e.seq < boundary:
            if e.seq not in self.log.elided:
                self.prepare_elided([e])
            return self.log.elided[e.seq][1]
        return self.log.price[e.seq]


def working_memory_line(generation, reason, start, boundary):
    return (
        f"Epoch {generation}, started because {reason}. Conversation from event {start} "
        f"is shown; tool output before event {boundary} is elided (`recall` reaches it)."
    )


def parse_snapshot(text):
    """(state text, reason, start, boundary) of a snapshot this engine wrote, or None."""
    state, sep, rest = text.partition(WORKING_MEMORY)
    m = _LINE.match(rest) if sep else None
    if m is None:
        return None
    return state, m.group(2), int(m.group(3)), int(m.group(4))


def state_part(entry):
    """The task-state text an entry of this engine carries."""
    if entry.kind == t.KernelContextKind.SNAPSHOT:
        return entry.text.partition(WORKING_MEMORY)[0]
    return entry.text


def plan_rotation(pricer, conversation, keep_results, target, avail, end):
    """Where a new epoch starts and which results it elides.

    `conversation` is the outline of every conversation event, ascending.
    Returns (start, boundary, retained tokens). Takes the newest whole units
    while they fit `target`; the newest unit always, if it fits `avail`
    (eliding its own results when it must). Raises BudgetExceeded when even
    that is impossible.
    """
    grouped = units(conversation)
    results = [e.seq for u in grouped for e in u[1:]]
    if keep_results == 0:
        boundary = end + 1
    elif len(results) >= keep_results:
        boundary = results[-keep_results]
    else:
        boundary = 0
    # Price the elided forms of the results near the tail in one batch.
    pricer.prepare_elided([e for u in grouped[-400:] for e in u if e.seq < boundary])
    taken = 0
    start = end + 1
    for u in reversed(grouped):
        cost = sum(pricer.event(e, boundary) for e in u)
        if start == end + 1:
            if cost > avail:
                boundary = end + 1
                cost = sum(pricer.event(e, boundary) for e in u)
                if cost > avail:
                    raise BudgetExceeded(
                        f"the newest message needs {cost} tokens even with its tool output "
                        f"elided, but only {avail} are left after the instructions and the "
                        "task state"
                    )
            taken, start = cost, u[0].seq
            if cost > target:
                break
            continue
        if taken + cost > target:
            break
        taken += cost
        start = u[0].seq
    return start, boundary, taken


class Epoch:
    """The current epoch as the log records it."""

    def __init__(self, snapshot_event, entry, parsed):
        self.seq = snapshot_event.seq
        self.entry = entry
        self.generation = entry.generation
        _, self.reason, self.start, self.boundary = parsed


def current_epoch(log, session):
    """The latest snapshot this engine persisted and the events after it, or None.

    Returns (epoch, compacted): `compacted` is true when the user asked for
    `/compact` after the snapshot.
    """
    compacted = False
    for o in reversed(log.outline):
        body = o.event.body
        if isinstance(body, t.EventBody_ManualCompact):
            compacted = True
        elif (
            isinstance(body, t.EventBody_KernelContext)
            and body.value.kind == t.KernelContextKind.SNAPSHOT
        ):
            whole = session.events(o.event.seq, o.event.seq + 1, 1)
            if not whole or not isinstance(whole[0].body, t.EventBody_KernelContext):
                return None, compacted
            entry = whole[0].body.value
            parsed = parse_snapshot(entry.text)
            if parsed is None or entry.epoch_start != parsed[2]:
                return None, compacted
            return Epoch(whole[0], entry, parsed), compacted
    return None, compacted


def epoch_messages(pricer, events, epoch):
    """The epoch's messages after the snapshot, with prices.

    Returns (items, latest entry of this epoch) where each item is
    (message, tokens, is_kernel).
    """
    shown = {e.seq for u in units([e for e in events if e.seq >= epoch.start]) for e in u}
    items = []
    latest = epoch.entry
    kernel_texts = []
    for e in events:
        body = e.body
        if e.seq in shown:
            if isinstance(body, t.EventBody_ToolResult) and e.seq < epoch.boundary:
                tokens = pricer.event(e, epoch.boundary)
                message = render.event_message(e, pricer.log.elided[e.seq][0])
            else:
                tokens = pricer.log.price[e.seq]
                message = render.event_message(e)
            items.append((message, tokens, False))
        elif (
            isinstance(body, t.EventBody_KernelContext)
            and e.seq > epoch.seq
            and body.value.generation == epoch.generation
            and body.value.kind == t.KernelContextKind.STATE_UPDATE
        ):
            latest = body.value
            items.append((render.kernel_message(body.value, e.seq), None, True))
            kernel_texts.append(render.framed_text(body.value.kind, body.value.text))
    prices = iter(pricer.texts(kernel_texts))
    items = [
        (m, render.MESSAGE_OVERHEAD + next(prices) if k else tokens, k) for m, tokens, k in items
    ]
    return items, latest
