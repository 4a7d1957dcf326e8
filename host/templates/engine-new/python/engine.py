"""{{name}}: a Latch context engine in Python (componentize-py).

A sliding window: the session context, then the newest whole conversation
units that fit the budget. Edit `ContextEngine.materialize` to change what
the model sees; `build.sh` turns this file into `{{name}}.wasm`.

componentize-py looks for the resource class in the module named after the
exported interface (`engine`), so this file keeps that name.
"""

import json

from componentize_py_types import Err
from wit_world.exports import engine as api
from wit_world.imports import estimator
from wit_world.imports import types as t

PAGE = 1000
END = (1 << 64) - 1
MESSAGE_OVERHEAD = 4


def session_context_text(ctx):
    """The session-context message's text, exactly as the host expects it."""
    text = f"# Session\nWorkspace: {ctx.workspace}\nMode: {ctx.mode}\n"
    if ctx.repository_instructions:
        text += "\n# Repository instructions\n" + ctx.repository_instructions
    return text


def event_message(event):
    """The message a conversation event renders, or None for bookkeeping."""
    body = event.body
    if isinstance(body, t.EventBody_UserMessage):
        role, parts = t.Role.USER, list(body.value)
    elif isinstance(body, t.EventBody_AssistantMessage):
        role, parts = t.Role.ASSISTANT, list(body.value)
    elif isinstance(body, t.EventBody_ToolResult):
        role, parts = t.Role.USER, [t.Part_ToolResult(body.value)]
    elif isinstance(body, t.EventBody_Notification):
        role, parts = t.Role.USER, [t.Part_Text(body.value)]
    else:
        return None
    return t.Message(role=role, parts=parts, kernel=None, source_seqs=[event.seq])


def units(events):
    """Whole units: a user message, a notification, or an assistant message
    with the tool results that answer it (a result without its call is left out)."""
    out, current, calls = [], None, set()
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


class ContextEngine(api.ContextEngine):
    def __init__(self, model: t.ModelProfile) -> None:
        self.model = model
        self.profile = model.estimator
        self.max_events = 2000

    def config(self) -> str:
        return json.dumps({"max_events": self.max_events})

    def set_config(self, text: str) -> None:
        try:
            value = json.loads(text)
        except ValueError as e:
            raise Err(api.ConfigError_Malformed(f"not JSON: {e}"))
        if not isinstance(value, dict):
            raise Err(api.ConfigError_Malformed("expected a JSON object"))
        max_events = self.max_events
        for key, v in value.items():
            if key != "max_events":
                raise Err(api.ConfigError_UnknownKey(key))
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 100_000:
                raise Err(api.ConfigError_InvalidValue((key, "expected an integer from 1 to 100000")))
            max_events = v
        self.max_events = max_events

    def set_estimator(self, profile: t.EstimatorProfile) -> None:
        self.profile = profile

    def default_budget(self) -> api.ContextBudget:
        return api.ContextBudget(
            context_window_tokens=self.model.context_window_tokens,
            reserve_tokens=self.model.reserve_tokens,
            recent_tokens=64_000,
            tools_tokens=0,
            extension_tokens=0,
        )

    def materialize(self, session, request: api.ContextRequest) -> api.ContextView:
        """Edit this function: it decides what the model sees."""
        budget = request.budget
        limit = max(budget.context_window_tokens - budget.reserve_tokens, 0)
        context_text = session_context_text(request.session_context)
        system, context = estimator.estimate(self.profile, [request.system_prompt, context_text])
        instructions = system + MESSAGE_OVERHEAD + context
        fixed = instructions + budget.tools_tokens
        if fixed > limit:
            raise Err(api.EngineError_BudgetExceeded(f"the instructions need {fixed} tokens but the limit is {limit}"))
        room = min(limit - fixed, max(budget.recent_tokens, 1))

        # Price the newest events from the outline (no bulky bodies), newest units first.
        start = 0
        outline = []
        while True:
            page = session.events_outline(start, END, PAGE, self.profile)
            outline.extend(page)
            if len(page) < PAGE:
                break
            start = page[-1].event.seq + 1
        outline = outline[-self.max_events :]
        price = {o.event.seq: o.tokens for o in outline}
        used, first, shown = 0, None, set()
        for unit in reversed(units([o.event for o in outline])):
            cost = sum(price[e.seq] for e in unit)
            if used + cost > room:
                break
            used += cost
            first = unit[0].seq
            shown.update(e.seq for e in unit)

        messages = [t.Message(role=t.Role.USER, parts=[t.Part_Text(context_text)], kernel=None, source_seqs=[])]
        at = first
        while at is not None:
            page = session.events(at, END, PAGE)
            messages.extend(event_message(e) for e in page if e.seq in shown)
            at = page[-1].seq + 1 if len(page) == PAGE else None
        total = instructions + used + budget.tools_tokens
        report = api.ContextReport(
            engine="{{name}} 0.1.0", instructions_tokens=instructions, state_tokens=0,
            recent_tokens=used, recall_tokens=0, episode_tokens=0,
            tools_tokens=budget.tools_tokens, extension_tokens=0, total_tokens=total,
            limit_tokens=limit, reserve_tokens=budget.reserve_tokens,
            headroom_tokens=limit - total, first_retained_seq=first, evicted_tokens=0,
            event_count=session.info().event_count, episode_count=0, episodes_shown=0,
            status="ok", epoch_generation=None, epoch_user_turns=0, rotation_reason=None,
            retained_after_rotation_tokens=0, image_count=0, image_tokens=0,
            common_prefix_tokens=0, request_tokens=total,
            provider_prefix_utilization=None, measured_hit_rate=None,
        )
        return api.ContextView(system=request.system_prompt, kept_messages=0, messages=messages, persist=[], report=report)

    def manual_compact(self, session):
        return []

    def recall(self, session, query: str, limit: int):
        """The newest `limit` matches of the host's search, in chronological order."""
        words = " ".join(query.split()[:64])
        while len(words.encode()) > 4096:
            words = words.rsplit(" ", 1)[0] if " " in words else ""
        hits = session.search(words, END, limit)
        return sorted((h.event for h in hits[:limit]), key=lambda e: e.seq)
