/*
 * A flat JSON object reader for engine configuration: `{"key": value, ...}`
 * with integer values. Enough for `set-config`, small enough to read; it
 * allocates nothing and keeps pointers into the caller's text.
 */
#ifndef LATCH_JSON_H
#define LATCH_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One member of the object: the key as it appears between the quotes, and
 * the value when it is an integer. */
typedef struct {
  const uint8_t *key;
  size_t key_len;
  bool is_int;
  int64_t value;
} json_member_t;

typedef struct {
  const uint8_t *s;
  size_t n, at;
} json_cursor_t;

static void json_ws(json_cursor_t *c) {
  while (c->at < c->n && (c->s[c->at] == ' ' || c->s[c->at] == '\t' ||
                          c->s[c->at] == '\n' || c->s[c->at] == '\r'))
    c->at++;
}

/* Skips a string starting at the opening quote; false when it never closes. */
static bool json_string(json_cursor_t *c, const uint8_t **start, size_t *len) {
  if (c->at >= c->n || c->s[c->at] != '"') return false;
  size_t from = ++c->at;
  while (c->at < c->n && c->s[c->at] != '"') {
    if (c->s[c->at] == '\\') c->at++;
    c->at++;
  }
  if (c->at >= c->n) return false;
  *start = c->s + from;
  *len = c->at - from;
  c->at++;
  return true;
}

/* Skips any value; reads it into `m` when it is an integer. */
static bool json_value(json_cursor_t *c, json_member_t *m) {
  json_ws(c);
  if (c->at >= c->n) return false;
  uint8_t ch = c->s[c->at];
  m->is_int = false;
  if (ch == '"') {
    const uint8_t *p;
    size_t l;
    return json_string(c, &p, &l);
  }
  if (ch == '{' || ch == '[') {
    int depth = 0;
    while (c->at < c->n) {
      ch = c->s[c->at];
      if (ch == '"') {
        const uint8_t *p;
        size_t l;
        if (!json_string(c, &p, &l)) return false;
        continue;
      }
      if (ch == '{' || ch == '[') depth++;
      if (ch == '}' || ch == ']') depth--;
      c->at++;
      if (depth == 0) return true;
    }
    return false;
  }
  size_t from = c->at;
  bool negative = ch == '-', digits_only = true;
  if (negative) c->at++;
  int64_t v = 0;
  size_t digits = 0;
  while (c->at < c->n) {
    ch = c->s[c->at];
    if (ch >= '0' && ch <= '9') {
      if (digits < 18) v = v * 10 + (ch - '0');
      digits++;
    } else if (ch == ',' || ch == '}' || ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t') {
      break;
    } else {
      digits_only = false;
    }
    c->at++;
  }
  if (c->at == from) return false;
  if (digits_only && digits > 0 && digits <= 18) {
    m->is_int = true;
    m->value = negative ? -v : v;
  } else {
    /* true, false, null, fractions, exponents: a value, not an integer. */
    size_t len = c->at - from;
    const char *word = (const char *)c->s + from;
    bool literal = (len == 4 && (word[0] == 't' || word[0] == 'n')) ||
                   (len == 5 && word[0] == 'f') || (ch >= '0' && ch <= '9') ||
                   word[0] == '-' || (word[0] >= '0' && word[0] <= '9');
    if (!literal) return false;
  }
  return true;
}

/* Parses a flat object into at most `max` members. Returns false when the
 * text is not a JSON object (the caller answers `malformed`). */
static bool json_object(const uint8_t *s, size_t n, json_member_t *out, size_t max,
                        size_t *count) {
  json_cursor_t c = {s, n, 0};
  *count = 0;
  json_ws(&c);
  if (c.at >= c.n || c.s[c.at] != '{') return false;
  c.at++;
  json_ws(&c);
  if (c.at < c.n && c.s[c.at] == '}') {
    c.at++;
  } else {
    for (;;) {
      json_member_t m;
      json_ws(&c);
      if (!json_string(&c, &m.key, &m.key_len)) return false;
      json_ws(&c);
      if (c.at >= c.n || c.s[c.at] != ':') return false;
      c.at++;
      if (!json_value(&c, &m)) return false;
      if (*count < max) out[(*count)++] = m;
      json_ws(&c);
      if (c.at < c.n && c.s[c.at] == ',') {
        c.at++;
        continue;
      }
      if (c.at < c.n && c.s[c.at] == '}') {
        c.at++;
        break;
      }
      return false;
    }
  }
  json_ws(&c);
  return c.at == c.n;
}

#endif
