//! Hostile input from a provider never panics the host: a short seeded
//! property run (part of `cargo test`, seconds) over the SSE parser and the
//! three wire decoders, driven exactly as the transport drives them
//! ([`latch_provider::decode::StreamDecoder`]). The events are generated from
//! each wire format's own shapes with hostile values in every field (huge and
//! negative numbers, wrong types, missing keys, unknown kinds, indexes out of
//! order, non-UTF-8 bytes), framed with every line ending and cut into
//! arbitrary chunks. `PROPTEST_CASES=100000 cargo test -p latch-provider
//! --test wire hostile` runs longer; `fuzz/` holds the libFuzzer targets.
//!
//! Every input a fuzzer or this run found is pinned below as a regression.

use latch_engine_sdk::types::Part;
use latch_provider::decode::{Failure, StreamDecoder, decode_body};
use latch_provider::openai::MaxTokensField;
use latch_provider::sse::SseParser;
use latch_provider::{AssistantTurn, ProviderKind, StreamEvent, Wire};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use serde_json::{Value, json};

/// The seed of the default run (`PROPTEST_RNG_SEED` picks another).
const SEED: u64 = 0x1a7c_4b0d;

/// A fixed-seed run of `cases` unless the environment asks otherwise; no
/// failure files are written into the source tree.
fn seeded(cases: u32) -> Config {
    let mut c = Config::default();
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        c.rng_seed = RngSeed::Fixed(SEED);
    }
    if std::env::var_os("PROPTEST_CASES").is_none() {
        c.cases = cases;
    }
    c.failure_persistence = None;
    c
}

const WIRES: [(Wire, ProviderKind); 3] = [
    (Wire::Anthropic, ProviderKind::Anthropic),
    (
        Wire::Chat(MaxTokensField::MaxTokens),
        ProviderKind::OpenAiCompatible,
    ),
    (Wire::Responses, ProviderKind::OpenAi),
];

// ---- values -------------------------------------------------------------

/// A number as providers might send one, hostile ones included.
fn num() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0u64..5000).prop_map(|n| json!(n)),
        Just(json!(u64::MAX)),
        Just(json!(u64::MAX - 1)),
        Just(json!(1u64 << 63)),
        any::<u64>().prop_map(|n| json!(n)),
        Just(json!(-1)),
        Just(json!(i64::MIN)),
        Just(json!(1.5)),
        Just(json!(1e300)),
        Just(json!("12")),
        Just(Value::Null),
    ]
}

/// A string: a wire word, empty, or anything.
fn text(words: &'static [&'static str]) -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => proptest::sample::select(words).prop_map(|w| json!(w)),
        1 => Just(json!("")),
        2 => "\\PC{0,12}".prop_map(|s| json!(s)),
        1 => num(),
    ]
}

/// Any JSON value, shallow.
fn any_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        num(),
        "\\PC{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(2, 8, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z_]{1,6}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// An object with each field present or missing.
fn obj(fields: Vec<(&'static str, BoxedStrategy<Value>)>) -> BoxedStrategy<Value> {
    let parts: Vec<BoxedStrategy<Option<(&'static str, Value)>>> = fields
        .into_iter()
        .map(|(k, v)| proptest::option::weighted(0.85, v.prop_map(move |v| (k, v))).boxed())
        .collect();
    parts
        .prop_map(|kv| {
            Value::Object(
                kv.into_iter()
                    .flatten()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
            )
        })
        .boxed()
}

fn kind(word: &'static str) -> BoxedStrategy<Value> {
    prop_oneof![8 => Just(json!(word)), 1 => text(WORDS)].boxed()
}

fn b<S: Strategy<Value = Value> + 'static>(s: S) -> BoxedStrategy<Value> {
    s.boxed()
}

const WORDS: &[&str] = &[
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "ping",
    "error",
    "text",
    "tool_use",
    "thinking",
    "redacted_thinking",
    "text_delta",
    "input_json_delta",
    "thinking_delta",
    "signature_delta",
    "end_turn",
    "tool_use",
    "max_tokens",
    "overloaded_error",
    "api_error",
    "stop",
    "tool_calls",
    "length",
    "function_call",
    "reasoning",
    "message",
    "output_text",
    "refusal",
    "response.output_item.added",
    "response.output_item.done",
    "response.completed",
    "response.incomplete",
    "response.failed",
    "response.output_text.delta",
    "response.function_call_arguments.delta",
    "server_error",
    "rate_limit_exceeded",
    "context_length_exceeded",
    "max_output_tokens",
    "call_0",
    "toolu_1",
    "fc_1",
    "{\"a\":1}",
    "{",
];

// ---- events per wire ----------------------------------------------------

fn anthropic_usage() -> BoxedStrategy<Value> {
    obj(vec![
        ("input_tokens", b(num())),
        ("output_tokens", b(num())),
        ("cache_read_input_tokens", b(num())),
        ("cache_creation_input_tokens", b(num())),
    ])
}

fn anthropic_event() -> BoxedStrategy<Value> {
    let block = obj(vec![
        (
            "type",
            b(text(&[
                "text",
                "tool_use",
                "thinking",
                "redacted_thinking",
                "image",
            ])),
        ),
        ("id", b(text(WORDS))),
        ("name", b(text(WORDS))),
        ("text", b(text(WORDS))),
        ("input", b(any_value())),
        ("thinking", b(text(WORDS))),
        ("signature", b(text(WORDS))),
        ("data", b(text(WORDS))),
    ]);
    let delta = obj(vec![
        (
            "type",
            b(text(&[
                "text_delta",
                "input_json_delta",
                "thinking_delta",
                "signature_delta",
                "citations_delta",
            ])),
        ),
        ("text", b(text(WORDS))),
        ("partial_json", b(text(WORDS))),
        ("thinking", b(text(WORDS))),
        ("signature", b(text(WORDS))),
        ("stop_reason", b(text(WORDS))),
    ]);
    prop_oneof![
        obj(vec![
            ("type", kind("message_start")),
            ("message", obj(vec![("usage", anthropic_usage())]))
        ]),
        obj(vec![
            ("type", kind("content_block_start")),
            ("index", b(num())),
            ("content_block", block)
        ]),
        obj(vec![
            ("type", kind("content_block_delta")),
            ("index", b(num())),
            ("delta", delta.clone())
        ]),
        obj(vec![
            ("type", kind("content_block_stop")),
            ("index", b(num()))
        ]),
        obj(vec![
            ("type", kind("message_delta")),
            ("delta", delta),
            ("usage", anthropic_usage())
        ]),
        obj(vec![("type", kind("message_stop"))]),
        obj(vec![("type", kind("ping"))]),
        obj(vec![
            ("type", kind("error")),
            (
                "error",
                obj(vec![("type", b(text(WORDS))), ("message", b(text(WORDS)))])
            )
        ]),
        any_value(),
    ]
    .boxed()
}

fn chat_event() -> BoxedStrategy<Value> {
    let call = obj(vec![
        ("index", b(num())),
        ("id", b(text(WORDS))),
        ("type", b(text(&["function"]))),
        (
            "function",
            obj(vec![
                ("name", b(text(WORDS))),
                ("arguments", b(text(WORDS))),
            ]),
        ),
    ]);
    let delta = obj(vec![
        ("role", b(text(&["assistant"]))),
        ("content", b(text(WORDS))),
        ("reasoning_content", b(text(WORDS))),
        ("reasoning", b(text(WORDS))),
        (
            "tool_calls",
            b(proptest::collection::vec(call, 0..3).prop_map(Value::Array)),
        ),
    ]);
    let choice = obj(vec![
        ("index", b(num())),
        ("delta", delta),
        ("finish_reason", b(text(WORDS))),
    ]);
    let usage = obj(vec![
        ("prompt_tokens", b(num())),
        ("completion_tokens", b(num())),
        (
            "prompt_tokens_details",
            obj(vec![("cached_tokens", b(num()))]),
        ),
        ("prompt_cache_hit_tokens", b(num())),
        ("prompt_cache_miss_tokens", b(num())),
        (
            "completion_tokens_details",
            obj(vec![("reasoning_tokens", b(num()))]),
        ),
    ]);
    prop_oneof![
        6 => obj(vec![
            ("choices", b(proptest::collection::vec(choice, 0..2).prop_map(Value::Array))),
            ("usage", usage),
        ]),
        1 => obj(vec![("error", obj(vec![("message", b(text(WORDS))), ("type", b(text(WORDS))), ("code", b(num()))]))]),
        1 => Just(json!("[DONE]")),
        1 => any_value(),
    ]
    .boxed()
}

fn responses_item() -> BoxedStrategy<Value> {
    obj(vec![
        (
            "type",
            b(text(&[
                "function_call",
                "reasoning",
                "message",
                "web_search_call",
            ])),
        ),
        ("id", b(text(WORDS))),
        ("call_id", b(text(WORDS))),
        ("name", b(text(WORDS))),
        ("arguments", b(text(WORDS))),
        ("encrypted_content", b(text(WORDS))),
        ("status", b(text(WORDS))),
        (
            "content",
            b(proptest::collection::vec(
                obj(vec![
                    ("type", b(text(&["output_text", "refusal"]))),
                    ("text", b(text(WORDS))),
                    ("refusal", b(text(WORDS))),
                ]),
                0..2,
            )
            .prop_map(Value::Array)),
        ),
    ])
}

fn responses_event() -> BoxedStrategy<Value> {
    let usage = obj(vec![
        ("input_tokens", b(num())),
        ("output_tokens", b(num())),
        (
            "input_tokens_details",
            obj(vec![("cached_tokens", b(num()))]),
        ),
        (
            "output_tokens_details",
            obj(vec![("reasoning_tokens", b(num()))]),
        ),
    ]);
    let response = obj(vec![
        ("usage", usage),
        (
            "output",
            b(proptest::collection::vec(responses_item(), 0..3).prop_map(Value::Array)),
        ),
        ("incomplete_details", obj(vec![("reason", b(text(WORDS)))])),
        (
            "error",
            obj(vec![("code", b(text(WORDS))), ("message", b(text(WORDS)))]),
        ),
    ]);
    prop_oneof![
        obj(vec![
            ("type", kind("response.output_item.added")),
            ("item", responses_item())
        ]),
        obj(vec![
            ("type", kind("response.output_text.delta")),
            ("delta", b(text(WORDS)))
        ]),
        obj(vec![
            ("type", kind("response.function_call_arguments.delta")),
            ("item_id", b(text(WORDS))),
            ("delta", b(text(WORDS))),
        ]),
        obj(vec![
            ("type", kind("response.reasoning_summary_text.delta")),
            ("delta", b(text(WORDS)))
        ]),
        obj(vec![
            ("type", kind("response.output_item.done")),
            ("output_index", b(num())),
            ("item", responses_item())
        ]),
        obj(vec![
            ("type", kind("response.completed")),
            ("response", response.clone())
        ]),
        obj(vec![
            ("type", kind("response.incomplete")),
            ("response", response.clone())
        ]),
        obj(vec![
            ("type", kind("response.failed")),
            ("response", response)
        ]),
        obj(vec![
            ("type", kind("error")),
            ("code", b(text(WORDS))),
            ("message", b(text(WORDS)))
        ]),
        any_value(),
    ]
    .boxed()
}

fn events_of(wire: Wire) -> BoxedStrategy<Value> {
    match wire {
        Wire::Anthropic => anthropic_event(),
        Wire::Chat(_) => chat_event(),
        Wire::Responses => responses_event(),
    }
}

// ---- framing ------------------------------------------------------------

/// How one event goes on the wire.
#[derive(Clone, Debug)]
struct Framing {
    event_line: bool,
    eol: &'static str,
    comment: bool,
    raw: bool,
}

fn framing() -> impl Strategy<Value = Framing> {
    (
        any::<bool>(),
        proptest::sample::select(&["\n", "\r\n", "\r"][..]),
        proptest::bool::weighted(0.1),
        proptest::bool::weighted(0.05),
    )
        .prop_map(|(event_line, eol, comment, raw)| Framing {
            event_line,
            eol,
            comment,
            raw,
        })
}

/// The body of a stream of `events`.
fn body(events: &[(Value, Framing)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (v, f) in events {
        let eol = f.eol;
        if f.comment {
            out.extend(format!(": keep-alive{eol}").as_bytes());
        }
        if f.event_line
            && let Some(t) = v.get("type").and_then(Value::as_str)
        {
            out.extend(format!("event: {t}{eol}").as_bytes());
        }
        let data = match v {
            Value::String(s) if s == "[DONE]" => s.clone(),
            // Not JSON at all.
            _ if f.raw => format!("{v}").chars().rev().collect(),
            _ => v.to_string(),
        };
        out.extend(format!("data: {data}{eol}{eol}").as_bytes());
    }
    out
}

/// The outcome of decoding, comparable across chunkings.
fn outcome(r: &Result<AssistantTurn, Failure>, events: &[StreamEvent]) -> String {
    format!("{r:?} / {events:?}")
}

fn decode_in_chunks(
    wire: Wire,
    kind: ProviderKind,
    body: &[u8],
    cuts: &[usize],
) -> (Result<AssistantTurn, Failure>, Vec<StreamEvent>) {
    let mut events = Vec::new();
    let mut emit = |e: StreamEvent| events.push(e);
    let mut decoder = StreamDecoder::new(wire, kind);
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
    points.sort_unstable();
    points.push(body.len());
    let mut from = 0;
    let mut result = None;
    for to in points {
        match decoder.push(&body[from..to], &mut emit) {
            Ok(Some(turn)) => {
                result = Some(Ok(turn));
                break;
            }
            Ok(None) => {}
            Err(f) => {
                result = Some(Err(f));
                break;
            }
        }
        from = to;
    }
    let result = result.unwrap_or_else(|| decoder.finish());
    (result, events)
}

/// What every committed turn satisfies, whatever the provider sent.
fn check_turn(wire: Wire, turn: &AssistantTurn) -> Result<(), TestCaseError> {
    for p in &turn.parts {
        if let Part::ToolCall(c) = p {
            prop_assert!(
                !c.name.is_empty(),
                "{wire:?}: a committed tool call without a name: {c:?}"
            );
        }
    }
    Ok(())
}

fn decoder_property(wire: Wire, kind: ProviderKind, cases: u32) {
    let strategy = (
        proptest::collection::vec((events_of(wire), framing()), 0..12),
        proptest::collection::vec(any::<usize>(), 0..6),
    );
    let mut runner = proptest::test_runner::TestRunner::new(seeded(cases));
    runner
        .run(&strategy, |(events, cuts)| {
            let body = body(&events);
            let mut all = Vec::new();
            let whole = decode_body(wire, kind, &body, &mut |e| all.push(e));
            let (chunked, chunk_events) = decode_in_chunks(wire, kind, &body, &cuts);
            prop_assert_eq!(outcome(&whole, &all), outcome(&chunked, &chunk_events));
            if let Ok(turn) = &whole {
                check_turn(wire, turn)?;
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{wire:?}: {e}"));
}

#[test]
fn anthropic_decoder_never_panics_whatever_the_stream() {
    decoder_property(WIRES[0].0, WIRES[0].1, 400);
}

#[test]
fn chat_completions_decoder_never_panics_whatever_the_stream() {
    decoder_property(WIRES[1].0, WIRES[1].1, 400);
}

#[test]
fn responses_decoder_never_panics_whatever_the_stream() {
    decoder_property(WIRES[2].0, WIRES[2].1, 400);
}

/// SSE bytes built from the format's own pieces and arbitrary bytes.
fn sse_bytes() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"data:".to_vec()),
        Just(b"data: ".to_vec()),
        Just(b"event: x".to_vec()),
        Just(b":".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"id: 1".to_vec()),
        Just(vec![0xff, 0xfe]),
        Just("é".as_bytes().to_vec()),
        proptest::collection::vec(any::<u8>(), 0..6),
    ];
    proptest::collection::vec(piece, 0..40).prop_map(|v| v.concat())
}

#[test]
fn sse_parser_is_chunking_invariant_and_never_panics() {
    let mut runner = proptest::test_runner::TestRunner::new(seeded(1000));
    runner
        .run(
            &(sse_bytes(), proptest::collection::vec(any::<usize>(), 0..8)),
            |(bytes, cuts)| {
                let mut whole = SseParser::new();
                let expected = whole.push(&bytes);
                let mut p = SseParser::new();
                let mut got = Vec::new();
                let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
                points.sort_unstable();
                points.push(bytes.len());
                let mut from = 0;
                for to in points {
                    got.extend(p.push(&bytes[from..to]));
                    from = to;
                }
                prop_assert_eq!(&got, &expected);
                prop_assert_eq!(p.has_pending(), whole.has_pending());
                for e in &expected {
                    prop_assert!(!e.data.contains('\r') && !e.event.contains(['\r', '\n']));
                }
                Ok(())
            },
        )
        .unwrap();
}

/// An event past the parser's bound stops it instead of growing memory.
#[test]
fn an_endless_event_stops_the_stream_with_a_clear_error() {
    let mut decoder = StreamDecoder::new(Wire::Anthropic, ProviderKind::Anthropic);
    let chunk = vec![b'a'; 1 << 20];
    let mut err = None;
    decoder.push(b"data: ", &mut |_| {}).unwrap();
    for _ in 0..80 {
        match decoder.push(&chunk, &mut |_| {}) {
            Ok(None) => {}
            Ok(Some(t)) => panic!("a turn from nothing: {t:?}"),
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    let err = format!("{:?}", err.expect("the parser stopped"));
    assert!(err.contains("larger than 64 MiB"), "{err}");
}

// ---- regressions: inputs the fuzzers and this run found -----------------

/// Decodes `body` whole; the result never panics and commits no nameless
/// tool call.
fn regression(wire: Wire, kind: ProviderKind, body: &[u8]) -> Result<AssistantTurn, String> {
    let r = decode_body(wire, kind, body, &mut |_| {});
    if let Ok(turn) = &r {
        check_turn(wire, turn).unwrap();
    }
    r.map_err(|e| format!("{e:?}"))
}

/// `cargo fuzz run responses` (crash-4933b083): a `response.completed`
/// whose only output is a `function_call` without a `name` was committed
/// as a call to the tool "".
#[test]
fn fuzz_responses_function_call_without_a_name() {
    let body = b"event: responssage\", \"id\": \"m1\", \"role\": \"assistant\", \"content\": [{\"type\": \"output_text\", \"texesponse.completed\ndata: {\"type\": \"response.completed\", \"response\": {\"output\": [{\"type\": \"function_call\", \"call_id\": \"c\", \"na\x8f\x9a\": \"shell\", \"arguments\": \"{}\"}]}}\n\n";
    let err = regression(Wire::Responses, ProviderKind::OpenAi, body).unwrap_err();
    assert!(err.contains("names no function"), "{err}");
}

/// The Anthropic property run (seed 0x1a7c4b0d): usage figures near
/// `u64::MAX` overflowed the sum of input and cache tokens and panicked.
#[test]
fn proptest_anthropic_usage_near_u64_max() {
    let body = format!(
        "data: {}\n\n",
        json!({"type": "message_delta", "usage": {
            "cache_creation_input_tokens": 1,
            "cache_read_input_tokens": u64::MAX,
            "input_tokens": 0,
        }})
    );
    let mut usage = Vec::new();
    let r = decode_body(
        Wire::Anthropic,
        ProviderKind::Anthropic,
        body.as_bytes(),
        &mut |e| {
            if let StreamEvent::Usage(u) = e {
                usage.push(u)
            }
        },
    );
    assert!(r.is_err(), "no message_stop: interrupted");
    assert_eq!(usage[0].input_tokens, Some(u64::MAX), "saturates");
    assert_eq!(usage[0].cache_miss_tokens, Some(1));
}
