"""A Latch context engine in Python: observation masking in cache epochs.

The recent window verbatim, older tool output elided (the contract's elided
form: same call, content ``[output elided: ≈N tokens; `recall` reaches it]``),
the canonical task state pinned as kernel context. "The Complexity Trap"
(2025) found this baseline to match LLM summarization at about half the
cost. How a view is built is in `masking.py`; the canonical renderings are
in `render.py`; this module is the contract's `context-engine` resource.

componentize-py looks for the resource class in the module named after the
exported interface (`engine`), so this file is that module.
"""

import json

from componentize_py_types import Err
from wit_world.exports import engine as api
from wit_world.imports import types as t

import masking
import render
from log import Log, is_conversation

NAME = "python-masking 0.1.0"
#: Settings and their defaults. `recent_tokens` 0 takes the request's mark.
DEFAULTS = {"recent_tokens": 0, "retain_percent": 50, "keep_results": 4}
#: Inclusive bounds of each setting.
BOUNDS = {"recent_tokens": (0, 10_000_000), "retain_percent": (10, 90), "keep_results": (0, 10_000)}
#: Most words and bytes of a `search` query the host accepts.
MAX_QUERY_WORDS, MAX_QUERY_BYTES = 64, 4096
DEFAULT_RECENT_TOKENS = 64_000


class ContextEngine(api.ContextEngine):
    """One instance per session; caches what it read, never what it decided."""

    def __init__(self, model: t.ModelProfile) -> None:
        self.model = model
        self.profile = model.estimator
        self.settings = dict(DEFAULTS)
        self.log = Log()
        self.previous = None  # the messages of the last view returned

    def config(self) -> str:
        return json.dumps(self.settings, sort_keys=True)

    def set_config(self, text: str) -> None:
        try:
            value = json.loads(text)
        except ValueError as e:
            raise Err(api.ConfigError_Malformed(f"not JSON: {e}"))
        if not isinstance(value, dict):
            raise Err(api.ConfigError_Malformed(f"expected a JSON object, got {text[:80]}"))
        updated = dict(self.settings)
        for key, v in value.items():
            if key not in BOUNDS:
                raise Err(api.ConfigError_UnknownKey(key))
            lo, hi = BOUNDS[key]
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise Err(api.ConfigError_InvalidValue((key, f"expected an integer from {lo} to {hi}")))
            updated[key] = v
        self.settings = updated

    def set_estimator(self, profile: t.EstimatorProfile) -> None:
        self.profile = profile

    def default_budget(self) -> api.ContextBudget:
        return api.ContextBudget(
            context_window_tokens=self.model.context_window_tokens,
            reserve_tokens=self.model.reserve_tokens,
            recent_tokens=DEFAULT_RECENT_TOKENS,
            tools_tokens=0,
            extension_tokens=0,
        )

    def materialize(self, session, request: api.ContextRequest) -> api.ContextView:
        try:
            view = self._materialize(session, request)
        except masking.BudgetExceeded as e:
            raise Err(api.EngineError_BudgetExceeded(str(e)))
        except Err:
            raise
        except Exception as e:  # a bug here must not trap the sandbox
            raise Err(api.EngineError_Internal(f"{type(e).__name__}: {e}"))
        messages = view.messages
        kept = 0
        if self.previous is not None:
            for a, b in zip(self.previous, messages):
                if a != b:
                    break
                kept += 1
        self.previous = messages
        view.kept_messages = kept
        view.messages = messages[kept:]
        return view

    def _materialize(self, session, request):
        info = session.info()
        self.log.sync(session, info, self.profile)
        pricer = masking.Pricer(self.log)
        budget = request.budget
        limit = max(budget.context_window_tokens - budget.reserve_tokens, 0)
        context = render.user_text(render.session_context_text(request.session_context))
        system_tokens, context_text_tokens = pricer.texts(
            [request.system_prompt, context.parts[0].value]
        )
        instructions = system_tokens + render.MESSAGE_OVERHEAD + context_text_tokens
        fixed = instructions + budget.tools_tokens
        if fixed > limit:
            raise masking.BudgetExceeded(
                f"the instructions and tools need {fixed} tokens but the limit is {limit}"
            )
        room = limit - fixed
        mark = self.settings["recent_tokens"] or budget.recent_tokens
        state = render.state_text(session.canonical_state())

        epoch, compacted = masking.current_epoch(self.log, session)
        reason = None
        if epoch is None:
            reason = "the session had no epoch of this engine yet"
        elif compacted:
            reason = "the user asked to compact"
        if epoch is not None and reason is None:
            view = self._continue(session, info, request, epoch, state, room, mark)
            if isinstance(view, str):
                reason = view
            else:
                return self._finish(request, info, context, instructions, view, epoch, "ok")
        return self._rotate(session, info, request, context, instructions, state, room, mark, reason)

    def _continue(self, session, info, request, epoch, state, room, mark):
        """The epoch's view extended by what is new, or why it must rotate."""
        events = self.log.events_from(session, epoch.start)
        pricer = masking.Pricer(self.log)
        items, latest = masking.epoch_messages(pricer, events, epoch)
        snapshot = render.kernel_message(epoch.entry, epoch.seq)
        items.insert(0, (snapshot, pricer.kernel(epoch.entry.kind, epoch.entry.text), True))
        persist = []
        if masking.state_part(latest) != state:
            entry = t.KernelContextEntry(
                generation=epoch.generation,
                revision=info.kernel_context_revision + 1,
                kind=t.KernelContextKind.STATE_UPDATE,
                epoch_start=None,
                text=state,
            )
            persist.append(entry)
            items.append((render.kernel_message(entry, None), pricer.kernel(entry.kind, state), True))
        kernel = sum(tok for _, tok, k in items if k)
        conversation = sum(tok for _, tok, k in items if not k)
        high = min(mark, room - kernel)
        if conversation > high:
            if kernel > room:
                return f"the task state needs {kernel} tokens, more than the {room} left"
            return f"working memory reached {conversation} tokens, over its {high}-token mark"
        return items, persist

    def _rotate(self, session, info, request, context, instructions, state, room, mark, reason):
        end = self.log.latest_seq()
        generation = info.kernel_context_generation + 1
        revision = info.kernel_context_revision + 1
        pricer = masking.Pricer(self.log)
        conversation = [o.event for o in self.log.outline if is_conversation(o.event.body)]
        # The snapshot's own line names the start and boundary; its price
        # barely depends on them, so plan with a generous stand-in first.
        stand_in = state + masking.WORKING_MEMORY + masking.working_memory_line(
            generation, reason, end + 1, end + 1
        )
        snapshot_tokens = pricer.kernel(t.KernelContextKind.SNAPSHOT, stand_in) + 8
        avail = room - snapshot_tokens
        if avail < 0:
            raise masking.BudgetExceeded(
                f"the task state needs {snapshot_tokens} tokens but only {room} are left "
                "after the instructions and tools"
            )
        high = min(mark, avail)
        target = high * self.settings["retain_percent"] // 100
        start, boundary, _ = masking.plan_rotation(
            pricer, conversation, self.settings["keep_results"], target, avail, end
        )
        entry = t.KernelContextEntry(
            generation=generation,
            revision=revision,
            kind=t.KernelContextKind.SNAPSHOT,
            epoch_start=start,
            text=state
            + masking.WORKING_MEMORY
            + masking.working_memory_line(generation, reason, start, boundary),
        )
        parsed = masking.parse_snapshot(entry.text)
        epoch = masking.Epoch(t.Event(seq=end + 1, time_ms=0, body=None), entry, parsed)
        epoch.seq = end + 1  # not persisted yet: everything before it is history
        events = self.log.events_from(session, start)
        items, _ = masking.epoch_messages(pricer, events, epoch)
        items.insert(0, (render.kernel_message(entry, None), pricer.kernel(entry.kind, entry.text), True))
        return self._finish(request, info, context, instructions, (items, [entry]), epoch, "rotated")

    def _finish(self, request, info, context, instructions, built, epoch, status):
        items, persist = built
        budget = request.budget
        limit = max(budget.context_window_tokens - budget.reserve_tokens, 0)
        kernel = sum(tok for _, tok, k in items if k)
        conversation = sum(tok for _, tok, k in items if not k)
        total = instructions + kernel + conversation + budget.tools_tokens
        if total > limit:
            raise masking.BudgetExceeded(f"the view needs {total} tokens but the limit is {limit}")
        messages = [context] + [m for m, _, _ in items]
        first = next((m.source_seqs[0] for m, _, k in items if not k), None)
        user_turns = sum(
            1
            for m, _, k in items
            if not k and m.role == t.Role.USER and isinstance(m.parts[0], t.Part_Text)
        )
        retained = sum(
            tok for m, tok, k in items if not k and m.source_seqs[0] < epoch.seq
        )
        image_count = image_tokens = 0
        for m in messages:
            c, tok = render.message_images(m)
            image_count += c
            image_tokens += tok
        report = api.ContextReport(
            engine=NAME,
            instructions_tokens=instructions,
            state_tokens=kernel,
            recent_tokens=conversation,
            recall_tokens=0,
            episode_tokens=0,
            tools_tokens=budget.tools_tokens,
            extension_tokens=0,
            total_tokens=total,
            limit_tokens=limit,
            reserve_tokens=budget.reserve_tokens,
            headroom_tokens=limit - total,
            first_retained_seq=first,
            evicted_tokens=0,
            event_count=info.event_count,
            episode_count=0,
            episodes_shown=0,
            status=status,
            epoch_generation=epoch.generation,
            epoch_user_turns=user_turns,
            rotation_reason=epoch.reason,
            retained_after_rotation_tokens=retained,
            image_count=image_count,
            image_tokens=image_tokens,
            common_prefix_tokens=0,
            request_tokens=total,
            provider_prefix_utilization=None,
            measured_hit_rate=None,
        )
        return api.ContextView(
            system=request.system_prompt,
            kept_messages=0,
            messages=messages,
            persist=persist,
            report=report,
        )

    def manual_compact(self, session):
        # The next view rotates when it finds the `manual-compact` event after
        # its snapshot; it knows the budget, this call does not.
        return []

    def recall(self, session, query: str, limit: int):
        """The newest `limit` matches, in chronological order."""
        words, size = [], 0
        for w in query.split()[:MAX_QUERY_WORDS]:
            extra = len(w.encode()) + (1 if words else 0)
            if size + extra > MAX_QUERY_BYTES:
                break
            words.append(w)
            size += extra
        hits = session.search(" ".join(words), (1 << 64) - 1, limit)
        events = [h.event for h in hits[:limit]]
        events.sort(key=lambda e: e.seq)
        return events
