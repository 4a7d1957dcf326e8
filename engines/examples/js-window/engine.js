// A Latch context engine in JavaScript: a sliding window with pinned
// canonical state.
//
// Every view is the session context, the canonical task state as one
// kernel-context entry (persisted when the state changes, then read back
// from the log), and the newest whole conversation units that fit. The
// window slides, so every view is sent whole (`keptMessages: 0`).
//
// Built with componentize-js (see build.sh). The contract's types map to
// JavaScript as jco maps them: records are objects with camelCase fields,
// enums are strings, variants are `{ tag, val }`, `option<T>` is the value
// or `undefined`, `u64` is a BigInt, and an export's error is thrown.

import { estimate } from 'latch:context/estimator@0.1.0';

const NAME = 'js-window 0.1.0';
const PAGE = 1000;
const END = (1n << 64n) - 1n;
const MESSAGE_OVERHEAD = 4;
const DEFAULT_RECENT_TOKENS = 64000;
const DEFAULTS = { max_events: 2000 };
const MAX_QUERY_WORDS = 64;
const MAX_QUERY_BYTES = 4096;

/** The session-context message's text (wit/context.wit, `message`). */
function sessionContextText(ctx) {
  let text = `# Session\nWorkspace: ${ctx.workspace}\nMode: ${ctx.mode}\n`;
  if (ctx.repositoryInstructions.length > 0) {
    text += `\n# Repository instructions\n${ctx.repositoryInstructions}`;
  }
  return text;
}

/** The message of a kernel-context entry; `seq` undefined until persisted. */
function kernelMessage(entry, seq) {
  return {
    role: 'user',
    parts: [{ tag: 'text', val: entry.text }],
    kernel: { generation: entry.generation, revision: entry.revision, kind: entry.kind, seq },
    sourceSeqs: seq === undefined ? [] : [seq],
  };
}

const FRAME_TAG = 'latch-kernel-context';

/**
 * Kernel-context text as the provider receives it (wit/context.wit,
 * `message`): a kernel-context message is priced as this, because the frame
 * counts toward the hard budget.
 */
function framedText(kind, text) {
  const escaped = text.split(`</${FRAME_TAG}`).join(`<\\/${FRAME_TAG}`);
  return `<${FRAME_TAG} kind="${kind}" author="context engine, not the user">\n${escaped}\n</${FRAME_TAG}>`;
}

/** The message a conversation event renders, or undefined for bookkeeping. */
function eventMessage(event) {
  const { tag, val } = event.body;
  let role;
  let parts;
  if (tag === 'user-message') [role, parts] = ['user', val];
  else if (tag === 'assistant-message') [role, parts] = ['assistant', val];
  else if (tag === 'tool-result') [role, parts] = ['user', [{ tag: 'tool-result', val }]];
  else if (tag === 'notification') [role, parts] = ['user', [{ tag: 'text', val }]];
  else return undefined;
  return { role, parts, kernel: undefined, sourceSeqs: [event.seq] };
}

/** Visual tokens of an image from its pixel dimensions (the SDK's rule). */
function imageTokens(width, height) {
  if (width === undefined || height === undefined || width === 0 || height === 0) return 1600;
  let [w, h] = [width, height];
  const long = Math.max(w, h);
  if (long > 1568) [w, h] = [w * (1568 / long), h * (1568 / long)];
  if (w * h > 1150000) {
    const s = Math.sqrt(1150000 / (w * h));
    [w, h] = [w * s, h * s];
  }
  return Math.min(Math.max(Math.ceil((Math.floor(w) * Math.floor(h)) / 750), 1), 1600);
}

const CONVERSATION = new Set(['user-message', 'assistant-message', 'tool-result', 'notification']);

/**
 * Whole units of conversation events, in log order: a user message, a
 * notification, or an assistant message with the results that answer it. A
 * result with no call before it in the range is left out (no orphans).
 */
function units(events) {
  const out = [];
  let current;
  let calls = new Set();
  for (const e of events) {
    const { tag, val } = e.body;
    if (tag === 'user-message' || tag === 'notification') {
      out.push([e]);
      current = undefined;
    } else if (tag === 'assistant-message') {
      current = [e];
      out.push(current);
      calls = new Set(val.filter((p) => p.tag === 'tool-call').map((p) => p.val.id));
    } else if (tag === 'tool-result' && current !== undefined && calls.has(val.callId)) {
      current.push(e);
    }
  }
  return out;
}

/** The canonical task state as pinned text, or undefined when it is empty. */
function stateText(s) {
  const out = ['# Task state'];
  const section = (title, lines) => {
    const kept = lines.map((l) => l.split(/\s+/).join(' ').trim()).filter((l) => l.length > 0);
    if (kept.length > 0) {
      out.push(`${title}:`);
      for (const l of kept.slice(-12)) out.push(`- ${l.length > 400 ? l.slice(0, 399) + '…' : l}`);
    }
  };
  if (s.goal !== undefined && s.goal.text.trim().length > 0) out.push(`Goal: ${s.goal.text.trim()}`);
  section('Constraints', s.constraints.map((e) => e.text));
  section('Decisions', s.decisions.map((e) => e.text));
  section('Completion criteria', s.criteria.map((e) => e.text));
  section('Open hypotheses', s.hypotheses.filter((h) => h.status === 'active').map((h) => h.text));
  section(
    'Rejected hypotheses (do not pursue)',
    s.hypotheses
      .filter((h) => h.status === 'rejected')
      .map((h) => `${h.text} (rejected: ${h.reason ?? 'no reason recorded'})`),
  );
  section('Disproved', s.disproofs.map((e) => e.text));
  section('Active failures', s.failures.map((f) => `${f.summary} (×${f.count})`));
  section('Open questions', s.questions.map((e) => e.text));
  section('Next actions', s.actions.map((e) => e.text));
  section('Notes', s.notes.map((e) => e.text));
  return out.length > 1 ? out.join('\n') : undefined;
}

/** A typed engine error, thrown as the export's `err` payload. */
class EngineFailure {
  constructor(tag, message) {
    this.payload = { tag, val: message };
  }
}

class ContextEngine {
  /** One instance per session. */
  constructor(model) {
    this.model = model;
    this.profile = model.estimator;
    this.settings = { ...DEFAULTS };
    this.resetLog();
  }

  resetLog() {
    this.outline = []; // outlined events, ascending
    this.profileRead = undefined;
    this.lastKernel = undefined; // index into outline of the latest kernel-context event
    this.entries = new Map(); // seq -> kernel-context entry read whole
    this.whole = new Map(); // seq -> whole event, for every seq in [wholeStart, wholeEnd)
    this.wholeStart = undefined;
    this.wholeEnd = 0n;
  }

  /** Whole events with `seq >= from`, ascending; a warm call reads only what is new. */
  wholeFrom(session, from) {
    if (this.wholeStart === undefined || from < this.wholeStart) {
      this.whole = new Map();
      this.wholeStart = from;
      this.wholeEnd = from;
    }
    for (const seq of this.whole.keys()) {
      if (seq < from) this.whole.delete(seq);
    }
    this.wholeStart = from;
    const end = this.outline[this.outline.length - 1].event.seq + 1n;
    let at = this.wholeEnd > from ? this.wholeEnd : from;
    while (at < end) {
      const page = session.events(at, end, PAGE);
      for (const e of page) this.whole.set(e.seq, e);
      if (page.length < PAGE) break;
      at = page[page.length - 1].seq + 1n;
    }
    this.wholeEnd = end;
    return [...this.whole.values()];
  }

  config() {
    return JSON.stringify(this.settings);
  }

  setConfig(json) {
    let value;
    try {
      value = JSON.parse(json);
    } catch (e) {
      throw { tag: 'malformed', val: `not JSON: ${e.message}` };
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      throw { tag: 'malformed', val: `expected a JSON object, got ${json.slice(0, 80)}` };
    }
    const updated = { ...this.settings };
    for (const [key, v] of Object.entries(value)) {
      if (key !== 'max_events') throw { tag: 'unknown-key', val: key };
      if (!Number.isInteger(v) || v < 1 || v > 100000) {
        throw { tag: 'invalid-value', val: [key, 'expected an integer from 1 to 100000'] };
      }
      updated[key] = v;
    }
    this.settings = updated;
  }

  setEstimator(profile) {
    this.profile = profile;
  }

  defaultBudget() {
    return {
      contextWindowTokens: this.model.contextWindowTokens,
      reserveTokens: this.model.reserveTokens,
      recentTokens: BigInt(DEFAULT_RECENT_TOKENS),
      toolsTokens: 0n,
      extensionTokens: 0n,
    };
  }

  /** Read the outline of every event not read yet. */
  sync(session, info) {
    if (this.profileRead !== this.profile || BigInt(this.outline.length) > info.eventCount) {
      this.resetLog();
      this.profileRead = this.profile;
    }
    let from = this.outline.length > 0 ? this.outline[this.outline.length - 1].event.seq + 1n : 0n;
    for (;;) {
      const page = session.eventsOutline(from, END, PAGE, this.profile);
      for (const o of page) {
        if (o.event.body.tag === 'kernel-context') this.lastKernel = this.outline.length;
        this.outline.push(o);
      }
      if (page.length < PAGE) break;
      from = page[page.length - 1].event.seq + 1n;
    }
    if (BigInt(this.outline.length) !== info.eventCount) {
      this.resetLog();
      this.profileRead = this.profile;
      this.sync(session, info);
    }
  }

  /** The pinned state: the latest persisted entry when it still holds, else a new one. */
  pinned(session, info) {
    const text = stateText(session.canonicalState());
    if (text === undefined) return { message: undefined, persist: [], text: '' };
    if (this.lastKernel !== undefined) {
      const seq = this.outline[this.lastKernel].event.seq;
      if (!this.entries.has(seq)) {
        const [whole] = session.events(seq, seq + 1n, 1);
        this.entries.set(seq, whole.body.val);
      }
      const entry = this.entries.get(seq);
      if (entry.text === text) return { message: kernelMessage(entry, seq), persist: [], text };
    }
    const entry = {
      generation: info.kernelContextGeneration,
      revision: info.kernelContextRevision + 1n,
      kind: 'state-update',
      epochStart: undefined,
      text,
    };
    return { message: kernelMessage(entry, undefined), persist: [entry], text };
  }

  materialize(session, request) {
    try {
      return this.view(session, request);
    } catch (e) {
      if (e instanceof EngineFailure) throw e.payload;
      throw { tag: 'internal', val: `${e && e.message ? e.message : e}` };
    }
  }

  view(session, request) {
    const info = session.info();
    this.sync(session, info);
    const budget = request.budget;
    const window = Number(budget.contextWindowTokens);
    const reserve = Number(budget.reserveTokens);
    const tools = Number(budget.toolsTokens);
    const limit = Math.max(window - reserve, 0);
    const contextText = sessionContextText(request.sessionContext);
    const pin = this.pinned(session, info);
    const [system, context, state] = estimate(this.profile, [
      request.systemPrompt,
      contextText,
      framedText('state-update', pin.text),
    ]);
    const instructions = system + MESSAGE_OVERHEAD + context;
    const stateTokens = pin.message === undefined ? 0 : MESSAGE_OVERHEAD + state;
    const fixed = instructions + tools + stateTokens;
    if (fixed > limit) {
      throw new EngineFailure(
        'budget-exceeded',
        `the instructions, tools and task state need ${fixed} tokens but the limit is ${limit}`,
      );
    }
    const room = Math.min(limit - fixed, Math.max(Number(budget.recentTokens), 1));

    // The newest whole units that fit, priced from the outline.
    const tail = [];
    for (let i = this.outline.length - 1; i >= 0 && tail.length < this.settings.max_events; i--) {
      const e = this.outline[i].event;
      if (CONVERSATION.has(e.body.tag)) tail.push(this.outline[i]);
    }
    tail.reverse();
    const price = new Map(tail.map((o) => [o.event.seq, Number(o.tokens)]));
    const grouped = units(tail.map((o) => o.event));
    let used = 0;
    let first;
    const shown = new Set();
    for (let i = grouped.length - 1; i >= 0; i--) {
      const cost = grouped[i].reduce((sum, e) => sum + price.get(e.seq), 0);
      if (used + cost > room) break;
      used += cost;
      first = grouped[i][0].seq;
      for (const e of grouped[i]) shown.add(e.seq);
    }

    const messages = [{ role: 'user', parts: [{ tag: 'text', val: contextText }], kernel: undefined, sourceSeqs: [] }];
    if (pin.message !== undefined) messages.push(pin.message);
    let imageCount = 0;
    let imageTotal = 0;
    const countImage = (m) => {
      imageCount += 1;
      imageTotal += imageTokens(m.width, m.height);
    };
    if (first !== undefined) {
      for (const e of this.wholeFrom(session, first)) {
        if (!shown.has(e.seq)) continue;
        const m = eventMessage(e);
        for (const p of m.parts) {
          if (p.tag === 'image') countImage(p.val);
          if (p.tag === 'tool-result') p.val.images.forEach(countImage);
        }
        messages.push(m);
      }
    }
    const total = instructions + stateTokens + used + tools;
    return {
      system: request.systemPrompt,
      keptMessages: 0,
      messages,
      persist: pin.persist,
      report: {
        engine: NAME,
        instructionsTokens: BigInt(instructions),
        stateTokens: BigInt(stateTokens),
        recentTokens: BigInt(used),
        recallTokens: 0n,
        episodeTokens: 0n,
        toolsTokens: BigInt(tools),
        extensionTokens: 0n,
        totalTokens: BigInt(total),
        limitTokens: BigInt(limit),
        reserveTokens: BigInt(reserve),
        headroomTokens: BigInt(limit - total),
        firstRetainedSeq: first,
        evictedTokens: 0n,
        eventCount: info.eventCount,
        episodeCount: 0,
        episodesShown: 0,
        status: 'ok',
        epochGeneration: undefined,
        epochUserTurns: 0,
        rotationReason: undefined,
        retainedAfterRotationTokens: 0n,
        imageCount,
        imageTokens: BigInt(imageTotal),
        commonPrefixTokens: 0n,
        requestTokens: BigInt(total),
        providerPrefixUtilization: undefined,
        measuredHitRate: undefined,
      },
    };
  }

  manualCompact(_session) {
    return [];
  }

  /** The newest `limit` matches, in chronological order. */
  recall(session, query, limit) {
    const words = [];
    let size = 0;
    const encoder = new TextEncoder();
    for (const w of query.split(/\s+/).filter((x) => x.length > 0).slice(0, MAX_QUERY_WORDS)) {
      const extra = encoder.encode(w).length + (words.length > 0 ? 1 : 0);
      if (size + extra > MAX_QUERY_BYTES) break;
      words.push(w);
      size += extra;
    }
    const hits = session.search(words.join(' '), END, limit);
    return hits
      .slice(0, limit)
      .map((h) => h.event)
      .sort((a, b) => (a.seq < b.seq ? -1 : a.seq > b.seq ? 1 : 0));
  }
}

export const engine = { ContextEngine };
