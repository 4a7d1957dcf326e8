/*
 * c-window: the smallest Latch context engine, in C.
 *
 * Each view is the session context, then the newest whole conversation units
 * that fit the budget (a user message, a notification, or an assistant turn
 * with the tool results that answer it). History is priced from
 * `events-outline` (each event's canonical price, without its body); only the
 * events shown are read whole, and their parts are moved, not copied, into
 * the view.
 *
 * The rules a C author follows (see README.md):
 *   - drop the `borrow<session-view>` an export receives before returning;
 *   - free what imports return, and the export's own arguments;
 *   - allocate what you return with malloc: the bindings free it after the
 *     host has copied it;
 *   - no stdio or files: the component must not import wasi:filesystem.
 *
 * `window_view` decides what the model sees: edit it.
 */
#include <stdlib.h>
#include <string.h>

#include "context_engine.h"
#include "json.h"

#define PAGE 1000
#define END UINT64_MAX
#define MESSAGE_OVERHEAD 4
#define DEFAULT_RECENT_TOKENS 64000
#define NAME "c-window 0.1.0"

typedef latch_context_types_estimator_profile_t profile_t;
typedef latch_context_session_borrow_session_view_t session_t;

struct exports_latch_context_engine_context_engine_t {
  uint64_t window, reserve;
  profile_t profile;
  uint32_t max_events;
};

typedef exports_latch_context_engine_context_engine_t engine_t;

/* ---- small helpers ----------------------------------------------------- */

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) abort();
  return p;
}

/* A string the view owns, copied from `len` bytes. */
static context_engine_string_t owned(const uint8_t *bytes, size_t len) {
  context_engine_string_t s = {xmalloc(len), len};
  memcpy(s.ptr, bytes, len);
  return s;
}

static context_engine_string_t owned_c(const char *text) {
  return owned((const uint8_t *)text, strlen(text));
}

/* Decimal digits of `v` into `out`; returns their number. */
static size_t decimal(uint64_t v, char *out) {
  char tmp[24];
  size_t n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  for (size_t i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
  return n;
}

/* Appends `len` bytes to a growing buffer. */
typedef struct {
  uint8_t *ptr;
  size_t len, cap;
} buf_t;

static void put(buf_t *b, const void *bytes, size_t len) {
  if (b->len + len > b->cap) {
    b->cap = (b->len + len) * 2 + 64;
    b->ptr = realloc(b->ptr, b->cap);
    if (!b->ptr) abort();
  }
  memcpy(b->ptr + b->len, bytes, len);
  b->len += len;
}

static void puts_(buf_t *b, const char *text) { put(b, text, strlen(text)); }

static exports_latch_context_engine_engine_error_t engine_error(uint8_t tag, const char *text) {
  exports_latch_context_engine_engine_error_t e;
  e.tag = tag;
  e.val.budget_exceeded = owned_c(text);
  return e;
}

/* ---- construction and settings ----------------------------------------- */

exports_latch_context_engine_own_context_engine_t
exports_latch_context_engine_constructor_context_engine(
    exports_latch_context_engine_model_profile_t *model) {
  engine_t *e = xmalloc(sizeof *e);
  e->window = model->context_window_tokens;
  e->reserve = model->reserve_tokens;
  e->profile = model->estimator;
  e->max_events = 2000;
  latch_context_types_model_profile_free(model);
  return exports_latch_context_engine_context_engine_new(e);
}

void exports_latch_context_engine_context_engine_destructor(engine_t *e) { free(e); }

void exports_latch_context_engine_method_context_engine_config(
    exports_latch_context_engine_borrow_context_engine_t self, context_engine_string_t *ret) {
  char text[64] = "{\"max_events\":";
  size_t n = strlen(text);
  n += decimal(self->max_events, text + n);
  text[n++] = '}';
  *ret = owned((const uint8_t *)text, n);
}

bool exports_latch_context_engine_method_context_engine_set_config(
    exports_latch_context_engine_borrow_context_engine_t self, context_engine_string_t *json,
    exports_latch_context_engine_config_error_t *err) {
  json_member_t members[16];
  size_t count;
  bool ok = false;
  uint32_t max_events = self->max_events;
  if (!json_object(json->ptr, json->len, members, 16, &count)) {
    err->tag = EXPORTS_LATCH_CONTEXT_ENGINE_CONFIG_ERROR_MALFORMED;
    err->val.malformed = owned_c("expected a JSON object of settings, e.g. {\"max_events\": 500}");
    goto done;
  }
  for (size_t i = 0; i < count; i++) {
    json_member_t *m = &members[i];
    if (m->key_len != 10 || memcmp(m->key, "max_events", 10) != 0) {
      err->tag = EXPORTS_LATCH_CONTEXT_ENGINE_CONFIG_ERROR_UNKNOWN_KEY;
      err->val.unknown_key = owned(m->key, m->key_len);
      goto done;
    }
    if (!m->is_int || m->value < 1 || m->value > 100000) {
      err->tag = EXPORTS_LATCH_CONTEXT_ENGINE_CONFIG_ERROR_INVALID_VALUE;
      err->val.invalid_value.f0 = owned_c("max_events");
      err->val.invalid_value.f1 = owned_c("expected an integer from 1 to 100000");
      goto done;
    }
    max_events = (uint32_t)m->value;
  }
  self->max_events = max_events;
  ok = true;
done:
  context_engine_string_free(json);
  return ok;
}

void exports_latch_context_engine_method_context_engine_set_estimator(
    exports_latch_context_engine_borrow_context_engine_t self, profile_t profile) {
  self->profile = profile;
}

void exports_latch_context_engine_method_context_engine_default_budget(
    exports_latch_context_engine_borrow_context_engine_t self,
    exports_latch_context_engine_context_budget_t *ret) {
  ret->context_window_tokens = self->window;
  ret->reserve_tokens = self->reserve;
  ret->recent_tokens = DEFAULT_RECENT_TOKENS;
  ret->tools_tokens = 0;
  ret->extension_tokens = 0;
}

/* ---- the outline: what each event costs and how it groups --------------- */

enum { SKIP = 0, UNIT_START = 1, UNIT_MORE = 2 };

typedef struct {
  uint64_t seq, tokens;
  uint8_t role; /* SKIP, UNIT_START or UNIT_MORE */
  bool shown;
} rec_t;

typedef struct {
  rec_t *ptr;
  size_t len, cap;
} recs_t;

/* The open tool calls of the latest assistant message (copied ids). */
typedef struct {
  context_engine_string_t *ids;
  size_t len;
} calls_t;

static void calls_clear(calls_t *c) {
  for (size_t i = 0; i < c->len; i++) free(c->ids[i].ptr);
  free(c->ids);
  c->ids = NULL;
  c->len = 0;
}

static bool calls_has(const calls_t *c, const context_engine_string_t *id) {
  for (size_t i = 0; i < c->len; i++)
    if (c->ids[i].len == id->len && memcmp(c->ids[i].ptr, id->ptr, id->len) == 0) return true;
  return false;
}

/* Reads the outline of the whole session, grouping events into units: a
 * result with no open call before it is SKIP (no orphans). */
static recs_t read_outline(session_t session, profile_t profile) {
  recs_t recs = {0};
  calls_t calls = {0};
  bool open = false;
  uint64_t from = 0;
  for (;;) {
    latch_context_session_list_outlined_event_t page;
    latch_context_session_method_session_view_events_outline(session, from, END, PAGE, profile,
                                                             &page);
    for (size_t i = 0; i < page.len; i++) {
      latch_context_types_event_t *ev = &page.ptr[i].event;
      rec_t r = {ev->seq, page.ptr[i].tokens, SKIP, false};
      latch_context_types_event_body_t *body = &ev->body;
      switch (body->tag) {
        case LATCH_CONTEXT_TYPES_EVENT_BODY_USER_MESSAGE:
        case LATCH_CONTEXT_TYPES_EVENT_BODY_NOTIFICATION:
          r.role = UNIT_START;
          open = false;
          break;
        case LATCH_CONTEXT_TYPES_EVENT_BODY_ASSISTANT_MESSAGE: {
          r.role = UNIT_START;
          open = true;
          calls_clear(&calls);
          latch_context_types_list_part_t *parts = &body->val.assistant_message;
          calls.ids = xmalloc(sizeof(context_engine_string_t) * parts->len);
          for (size_t p = 0; p < parts->len; p++) {
            if (parts->ptr[p].tag == LATCH_CONTEXT_TYPES_PART_TOOL_CALL) {
              context_engine_string_t *id = &parts->ptr[p].val.tool_call.id;
              calls.ids[calls.len++] = owned(id->ptr, id->len);
            }
          }
          break;
        }
        case LATCH_CONTEXT_TYPES_EVENT_BODY_TOOL_RESULT:
          if (open && calls_has(&calls, &body->val.tool_result.call_id)) r.role = UNIT_MORE;
          break;
        default:
          break;
      }
      if (recs.len == recs.cap) {
        recs.cap = recs.cap * 2 + 256;
        recs.ptr = realloc(recs.ptr, recs.cap * sizeof(rec_t));
        if (!recs.ptr) abort();
      }
      recs.ptr[recs.len++] = r;
    }
    size_t n = page.len;
    if (n > 0) from = page.ptr[n - 1].event.seq + 1;
    latch_context_session_list_outlined_event_free(&page);
    if (n < PAGE) break;
  }
  calls_clear(&calls);
  return recs;
}

/* ---- the view --------------------------------------------------------------- */

/* Moves a shown event's body into a message of the view. */
static void event_message(latch_context_types_event_t *ev, latch_context_types_message_t *m) {
  memset(m, 0, sizeof *m);
  m->source_seqs.ptr = xmalloc(sizeof(uint64_t));
  m->source_seqs.ptr[0] = ev->seq;
  m->source_seqs.len = 1;
  m->kernel.is_some = false;
  latch_context_types_event_body_t *body = &ev->body;
  switch (body->tag) {
    case LATCH_CONTEXT_TYPES_EVENT_BODY_USER_MESSAGE:
      m->role = LATCH_CONTEXT_TYPES_ROLE_USER;
      m->parts = body->val.user_message;
      body->val.user_message.ptr = NULL;
      body->val.user_message.len = 0;
      break;
    case LATCH_CONTEXT_TYPES_EVENT_BODY_ASSISTANT_MESSAGE:
      m->role = LATCH_CONTEXT_TYPES_ROLE_ASSISTANT;
      m->parts = body->val.assistant_message;
      body->val.assistant_message.ptr = NULL;
      body->val.assistant_message.len = 0;
      break;
    case LATCH_CONTEXT_TYPES_EVENT_BODY_TOOL_RESULT:
      m->role = LATCH_CONTEXT_TYPES_ROLE_USER;
      m->parts.ptr = xmalloc(sizeof(latch_context_types_part_t));
      m->parts.len = 1;
      m->parts.ptr[0].tag = LATCH_CONTEXT_TYPES_PART_TOOL_RESULT;
      m->parts.ptr[0].val.tool_result = body->val.tool_result;
      /* The body is now empty: turn it into a variant that owns nothing. */
      body->tag = LATCH_CONTEXT_TYPES_EVENT_BODY_MANUAL_COMPACT;
      break;
    default: /* notification */
      m->role = LATCH_CONTEXT_TYPES_ROLE_USER;
      m->parts.ptr = xmalloc(sizeof(latch_context_types_part_t));
      m->parts.len = 1;
      m->parts.ptr[0].tag = LATCH_CONTEXT_TYPES_PART_TEXT;
      m->parts.ptr[0].val.text = body->val.notification;
      body->tag = LATCH_CONTEXT_TYPES_EVENT_BODY_MANUAL_COMPACT;
      break;
  }
}

/* Edit this function: it decides what the model sees. */
static bool window_view(engine_t *self, session_t session,
                        exports_latch_context_engine_context_request_t *request,
                        exports_latch_context_engine_context_view_t *view,
                        exports_latch_context_engine_engine_error_t *err) {
  exports_latch_context_engine_context_budget_t *budget = &request->budget;
  uint64_t limit = budget->context_window_tokens > budget->reserve_tokens
                       ? budget->context_window_tokens - budget->reserve_tokens
                       : 0;

  /* The session-context message, exactly as the contract renders it. */
  exports_latch_context_engine_session_context_t *ctx = &request->session_context;
  buf_t text = {0};
  puts_(&text, "# Session\nWorkspace: ");
  put(&text, ctx->workspace.ptr, ctx->workspace.len);
  puts_(&text, "\nMode: ");
  put(&text, ctx->mode.ptr, ctx->mode.len);
  puts_(&text, "\n");
  if (ctx->repository_instructions.len > 0) {
    puts_(&text, "\n# Repository instructions\n");
    put(&text, ctx->repository_instructions.ptr, ctx->repository_instructions.len);
  }

  /* Price the instructions with the host's canonical estimator. */
  context_engine_string_t texts[2] = {request->system_prompt, {text.ptr, text.len}};
  context_engine_list_string_t list = {texts, 2};
  context_engine_list_u32_t prices;
  latch_context_estimator_estimate(self->profile, &list, &prices);
  uint64_t instructions = (uint64_t)prices.ptr[0] + MESSAGE_OVERHEAD + prices.ptr[1];
  context_engine_list_u32_free(&prices);
  uint64_t fixed = instructions + budget->tools_tokens;
  if (fixed > limit) {
    free(text.ptr);
    *err = engine_error(EXPORTS_LATCH_CONTEXT_ENGINE_ENGINE_ERROR_BUDGET_EXCEEDED,
                        "the instructions and tools need more tokens than the budget's limit");
    return false;
  }
  uint64_t room = limit - fixed;
  uint64_t recent = budget->recent_tokens > 0 ? budget->recent_tokens : 1;
  if (room > recent) room = recent;

  /* The newest whole units that fit, walking back over the outline. */
  recs_t recs = read_outline(session, self->profile);
  uint64_t used = 0, unit = 0;
  size_t looked = 0, first = recs.len, unit_end = recs.len;
  for (size_t i = recs.len; i-- > 0 && looked < self->max_events;) {
    if (recs.ptr[i].role == SKIP) continue;
    looked++;
    unit += recs.ptr[i].tokens;
    if (recs.ptr[i].role == UNIT_START) {
      if (used + unit > room) break;
      used += unit;
      unit = 0;
      first = i;
      for (size_t j = i; j < unit_end; j++)
        if (recs.ptr[j].role != SKIP) recs.ptr[j].shown = true;
      unit_end = i;
    }
  }

  /* Count the messages, then read the shown events whole and move them in. */
  size_t count = 1;
  for (size_t i = first; i < recs.len; i++) count += recs.ptr[i].shown;
  latch_context_types_message_t *messages = xmalloc(count * sizeof *messages);
  memset(&messages[0], 0, sizeof messages[0]);
  messages[0].role = LATCH_CONTEXT_TYPES_ROLE_USER;
  messages[0].parts.ptr = xmalloc(sizeof(latch_context_types_part_t));
  messages[0].parts.len = 1;
  messages[0].parts.ptr[0].tag = LATCH_CONTEXT_TYPES_PART_TEXT;
  messages[0].parts.ptr[0].val.text = (context_engine_string_t){text.ptr, text.len};
  size_t at = 1, r = first;
  uint64_t from = first < recs.len ? recs.ptr[first].seq : END;
  uint32_t images = 0;
  while (at < count) {
    latch_context_session_list_event_t page;
    latch_context_session_method_session_view_events(session, from, END, PAGE, &page);
    for (size_t i = 0; i < page.len && at < count; i++) {
      latch_context_types_event_t *ev = &page.ptr[i];
      while (r < recs.len && recs.ptr[r].seq < ev->seq) r++;
      if (r < recs.len && recs.ptr[r].seq == ev->seq && recs.ptr[r].shown) {
        event_message(ev, &messages[at]);
        for (size_t p = 0; p < messages[at].parts.len; p++) {
          latch_context_types_part_t *part = &messages[at].parts.ptr[p];
          if (part->tag == LATCH_CONTEXT_TYPES_PART_IMAGE) images++;
          if (part->tag == LATCH_CONTEXT_TYPES_PART_TOOL_RESULT)
            images += (uint32_t)part->val.tool_result.images.len;
        }
        at++;
      }
    }
    size_t n = page.len;
    if (n > 0) from = page.ptr[n - 1].seq + 1;
    latch_context_session_list_event_free(&page);
    if (n < PAGE) break;
  }
  count = at; /* every shown event was read; this only guards a log that shrank */

  latch_context_session_session_info_t info;
  latch_context_session_method_session_view_info(session, &info);
  uint64_t events = info.event_count;
  latch_context_session_session_info_free(&info);

  /* The view owns the system prompt now: take it from the request. */
  view->system = request->system_prompt;
  request->system_prompt = (context_engine_string_t){NULL, 0};
  view->kept_messages = 0; /* the window slides: every view is whole */
  view->messages.ptr = messages;
  view->messages.len = count;
  view->persist.ptr = NULL;
  view->persist.len = 0;

  exports_latch_context_engine_context_report_t *rep = &view->report;
  memset(rep, 0, sizeof *rep);
  uint64_t total = instructions + used + budget->tools_tokens;
  rep->engine = owned_c(NAME);
  rep->instructions_tokens = instructions;
  rep->recent_tokens = used;
  rep->tools_tokens = budget->tools_tokens;
  rep->total_tokens = total;
  rep->limit_tokens = limit;
  rep->reserve_tokens = budget->reserve_tokens;
  rep->headroom_tokens = limit - total;
  rep->first_retained_seq.is_some = first < recs.len;
  rep->first_retained_seq.val = first < recs.len ? recs.ptr[first].seq : 0;
  rep->event_count = events;
  rep->status = owned_c("ok");
  rep->image_count = images;
  rep->request_tokens = total;
  free(recs.ptr);
  return true;
}

bool exports_latch_context_engine_method_context_engine_materialize(
    exports_latch_context_engine_borrow_context_engine_t self,
    exports_latch_context_engine_borrow_session_view_t session,
    exports_latch_context_engine_context_request_t *request,
    exports_latch_context_engine_context_view_t *ret,
    exports_latch_context_engine_engine_error_t *err) {
  bool ok = window_view(self, session, request, ret, err);
  exports_latch_context_engine_context_request_free(request);
  latch_context_session_session_view_drop_borrow(session);
  return ok;
}

bool exports_latch_context_engine_method_context_engine_manual_compact(
    exports_latch_context_engine_borrow_context_engine_t self,
    exports_latch_context_engine_borrow_session_view_t session,
    exports_latch_context_engine_list_kernel_context_entry_t *ret,
    exports_latch_context_engine_engine_error_t *err) {
  /* A window keeps no epochs: nothing to persist. */
  ret->ptr = NULL;
  ret->len = 0;
  latch_context_session_session_view_drop_borrow(session);
  return true;
}

/* The newest `limit` matches of the host's search, in chronological order. */
bool exports_latch_context_engine_method_context_engine_recall(
    exports_latch_context_engine_borrow_context_engine_t self,
    exports_latch_context_engine_borrow_session_view_t session, context_engine_string_t *query,
    uint32_t limit, exports_latch_context_engine_list_event_t *ret,
    exports_latch_context_engine_engine_error_t *err) {
  /* The host accepts at most 64 words and 4096 bytes: keep whole words. */
  buf_t q = {0};
  size_t words = 0, i = 0;
  while (i < query->len && words < 64) {
    while (i < query->len && (query->ptr[i] == ' ' || query->ptr[i] == '\t' ||
                              query->ptr[i] == '\n' || query->ptr[i] == '\r'))
      i++;
    size_t from = i;
    while (i < query->len && !(query->ptr[i] == ' ' || query->ptr[i] == '\t' ||
                               query->ptr[i] == '\n' || query->ptr[i] == '\r'))
      i++;
    if (i == from) break;
    if (q.len + (q.len > 0) + (i - from) > 4096) break;
    if (q.len > 0) put(&q, " ", 1);
    put(&q, query->ptr + from, i - from);
    words++;
  }
  context_engine_string_t bounded = {q.ptr, q.len};
  latch_context_session_list_search_hit_t hits;
  latch_context_session_method_session_view_search(session, &bounded, END, limit, &hits);
  free(q.ptr);
  size_t n = hits.len < limit ? hits.len : limit;
  ret->ptr = xmalloc(n * sizeof(latch_context_types_event_t));
  ret->len = n;
  for (size_t h = 0; h < n; h++) {
    /* Insertion sort by seq while moving each event out of its hit. */
    latch_context_types_event_t ev = hits.ptr[h].event;
    hits.ptr[h].event.body.tag = LATCH_CONTEXT_TYPES_EVENT_BODY_MANUAL_COMPACT;
    size_t j = h;
    while (j > 0 && ret->ptr[j - 1].seq > ev.seq) {
      ret->ptr[j] = ret->ptr[j - 1];
      j--;
    }
    ret->ptr[j] = ev;
  }
  latch_context_session_list_search_hit_free(&hits);
  context_engine_string_free(query);
  latch_context_session_session_view_drop_borrow(session);
  return true;
}
