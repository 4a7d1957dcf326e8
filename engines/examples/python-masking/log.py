"""What this instance has read of the session's log.

The log only grows, so everything read stays true: the outline of every
event (its canonical price, no bulky bodies) is read once, whole events only
from the current epoch's start, and a warm call reads just what is new. A
log that does not extend what was read (another profile, fewer events than
cached) is read again from the start.
"""

from wit_world.imports import types as t

#: Most events one `events` / `events-outline` call returns.
PAGE = 1000
#: The largest sequence number (`u64::MAX`).
END = (1 << 64) - 1


class Log:
    """Outlines of every event and whole events of the current epoch."""

    def __init__(self):
        self.profile = None
        self.outline = []  # OutlinedEvent, ascending
        self.price = {}  # seq -> canonical price of the event's message
        self.elided = {}  # seq -> (marker tokens N, price of the elided message)
        self.whole = {}  # seq -> Event, for seq >= self.whole_from
        self.whole_from = None
        self.whole_to = 0  # every event with whole_from <= seq < whole_to is cached

    def reset(self):
        self.__init__()

    def sync(self, session, info, profile):
        """Read the outline of every event not read yet."""
        if profile != self.profile or len(self.outline) > info.event_count:
            self.reset()
            self.profile = profile
        start = self.outline[-1].event.seq + 1 if self.outline else 0
        while True:
            page = session.events_outline(start, END, PAGE, profile)
            self.outline.extend(page)
            for o in page:
                self.price[o.event.seq] = o.tokens
            if len(page) < PAGE:
                break
            start = page[-1].event.seq + 1
        if len(self.outline) != info.event_count:
            # The session changed under the cache: read it again.
            self.reset()
            self.profile = profile
            self.sync(session, info, profile)

    def latest_seq(self):
        return self.outline[-1].event.seq if self.outline else 0

    def events_from(self, session, start):
        """Whole events with `seq >= start`, ascending, read once."""
        if self.whole_from is None or start < self.whole_from:
            self.whole = {}
            self.whole_from = start
            self.whole_to = start
        elif start > self.whole_from:
            self.whole = {s: e for s, e in self.whole.items() if s >= start}
            self.whole_from = start
        end = self.latest_seq() + 1
        at = max(self.whole_to, start)
        while at < end:
            page = session.events(at, end, PAGE)
            for e in page:
                self.whole[e.seq] = e
            if len(page) < PAGE:
                break
            at = page[-1].seq + 1
        self.whole_to = max(self.whole_to, end)
        return [self.whole[s] for s in sorted(self.whole) if s >= start]


def is_conversation(body):
    return isinstance(
        body,
        (
            t.EventBody_UserMessage,
            t.EventBody_AssistantMessage,
            t.EventBody_ToolResult,
            t.EventBody_Notification,
        ),
    )


def units(events):
    """Group conversation events into whole units, in log order.

    A unit is a user message, a notification, or an assistant message with
    the tool results that answer it. A result with no call before it in the
    range is left out, so a view never holds an orphan. Works on whole and on
    outlined events alike (both carry the call ids).
    """
    out = []
    current = None
    calls = set()
    for e in events:
        body = e.body
        if isinstance(body, (t.EventBody_UserMessage, t.EventBody_Notification)):
            out.append([e])
            current = None
        elif isinstance(body, t.EventBody_AssistantMessage):
            current = [e]
            out.append(current)
            calls = {p.value.id for p in body.value if isinstance(p, t.Part_ToolCall)}
        elif isinstance(body, t.EventBody_ToolResult):
            if current is not None and body.value.call_id in calls:
                current.append(e)
    return out
