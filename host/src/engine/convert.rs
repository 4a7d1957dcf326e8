//! Conversions between the SDK's contract types (the host's vocabulary) and the
//! types wasmtime generates for the component boundary. Both are generated from
//! the same WIT, so every conversion is field for field.

use super::bindings::context::exports::latch::context::engine as we;
use super::bindings::context::latch::context::types as wt;
use latch_engine_sdk::types as s;

/// A field-for-field conversion between two generations of the same WIT type.
pub(crate) trait Conv<T> {
    fn conv(self) -> T;
}

macro_rules! identity {
    ($($t:ty),*) => { $(impl Conv<$t> for $t { fn conv(self) -> $t { self } })* };
}
identity!(u32, u64, bool, f64, String);

impl<A: Conv<B>, B> Conv<Vec<B>> for Vec<A> {
    fn conv(self) -> Vec<B> {
        self.into_iter().map(Conv::conv).collect()
    }
}

impl<A: Conv<B>, B> Conv<Option<B>> for Option<A> {
    fn conv(self) -> Option<B> {
        self.map(Conv::conv)
    }
}

impl<A: Conv<C>, B: Conv<D>, C, D> Conv<(C, D)> for (A, B) {
    fn conv(self) -> (C, D) {
        (self.0.conv(), self.1.conv())
    }
}

/// Records: both directions, field by field.
macro_rules! record {
    ($a:ty, $b:ty { $($f:ident),* $(,)? }) => {
        impl Conv<$b> for $a {
            fn conv(self) -> $b {
                type Target = $b;
                Target { $($f: self.$f.conv()),* }
            }
        }
        impl Conv<$a> for $b {
            fn conv(self) -> $a {
                type Target = $a;
                Target { $($f: self.$f.conv()),* }
            }
        }
    };
}

/// Enums and variants: both directions, case by case (payloads converted).
macro_rules! cases {
    ($a:ty, $b:ty { $($v:ident $( ( $x:ident ) )?),* $(,)? }) => {
        impl Conv<$b> for $a {
            fn conv(self) -> $b {
                type Src = $a;
                type Dst = $b;
                match self { $(Src::$v $( ($x) )? => Dst::$v $( ($x.conv()) )?),* }
            }
        }
        impl Conv<$a> for $b {
            fn conv(self) -> $a {
                type Src = $b;
                type Dst = $a;
                match self { $(Src::$v $( ($x) )? => Dst::$v $( ($x.conv()) )?),* }
            }
        }
    };
}

cases!(
    s::EstimatorProfile,
    wt::EstimatorProfile {
        Openai,
        Anthropic,
        CjkOptimized
    }
);
record!(
    s::ModelProfile,
    wt::ModelProfile {
        provider,
        model,
        context_window_tokens,
        reserve_tokens,
        estimator
    }
);
record!(
    s::MediaRef,
    wt::MediaRef {
        sha256,
        mime_type,
        byte_len,
        width,
        height
    }
);
record!(
    s::ToolCall,
    wt::ToolCall {
        id,
        name,
        arguments_json
    }
);
record!(
    s::ToolResult,
    wt::ToolResult {
        call_id,
        name,
        content,
        is_error,
        images
    }
);
cases!(s::Role, wt::Role { User, Assistant });
cases!(s::Part, wt::Part { Text(x), Image(x), ToolCall(x), ToolResult(x) });
cases!(
    s::KernelContextKind,
    wt::KernelContextKind {
        Snapshot,
        StateUpdate,
        Extension,
        Recall,
        ArchiveIndex,
        Reground
    }
);
record!(
    s::KernelContextEntry,
    wt::KernelContextEntry {
        generation,
        revision,
        kind,
        epoch_start,
        text
    }
);
record!(
    s::KernelTag,
    wt::KernelTag {
        generation,
        revision,
        kind,
        seq
    }
);
record!(
    s::Message,
    wt::Message {
        role,
        parts,
        kernel,
        source_seqs
    }
);
cases!(
    s::KernelNoteKind,
    wt::KernelNoteKind {
        StateUpdate,
        Mutation,
        ValidationPassed,
        ValidationFailed,
        Evidence,
        Failure,
        Reground,
        ExternalChange,
        Process,
        Other
    }
);
record!(
    s::KernelNote,
    wt::KernelNote {
        kind,
        summary,
        files
    }
);
record!(s::ExtensionEvent, wt::ExtensionEvent { kind, json });
cases!(s::EventBody, wt::EventBody {
    UserMessage(x), AssistantMessage(x), ToolResult(x), KernelContext(x), Notification(x),
    ManualCompact, Kernel(x), Extension(x)
});
record!(s::Event, wt::Event { seq, time_ms, body });
record!(s::SearchHit, wt::SearchHit { event, snippet });
record!(
    s::SessionInfo,
    wt::SessionInfo {
        id,
        parent_id,
        workspace,
        workspace_generation,
        model,
        event_count,
        state_revision,
        kernel_context_generation,
        kernel_context_revision
    }
);
record!(s::StateEntry, wt::StateEntry { text, seq });
record!(s::OutlinedEvent, wt::OutlinedEvent { event, tokens });
cases!(
    s::HypothesisStatus,
    wt::HypothesisStatus { Active, Rejected }
);
record!(
    s::Hypothesis,
    wt::Hypothesis {
        text,
        seq,
        status,
        reason
    }
);
cases!(
    s::ValidationOutcome,
    wt::ValidationOutcome { Passed, Failed }
);
record!(
    s::Evidence,
    wt::Evidence {
        requirement,
        command,
        outcome,
        generation,
        stale,
        seq
    }
);
record!(
    s::FailureLineage,
    wt::FailureLineage {
        key,
        summary,
        count,
        first_seq,
        last_seq
    }
);
record!(
    s::FileState,
    wt::FileState {
        path,
        sha256,
        size,
        seq
    }
);
record!(
    s::CanonicalState,
    wt::CanonicalState {
        revision,
        goal,
        constraints,
        decisions,
        hypotheses,
        files,
        validations,
        evidence,
        failures,
        disproofs,
        questions,
        actions,
        criteria,
        notes
    }
);

cases!(s::EngineError, we::EngineError { InvalidRequest(x), BudgetExceeded(x), Session(x), Unsupported(x), Internal(x) });
cases!(s::ConfigError, we::ConfigError { UnknownKey(x), InvalidValue(x), Malformed(x) });
record!(
    s::ContextBudget,
    we::ContextBudget {
        context_window_tokens,
        reserve_tokens,
        recent_tokens,
        tools_tokens,
        extension_tokens
    }
);
record!(
    s::SessionContext,
    we::SessionContext {
        workspace,
        repository_instructions,
        mode
    }
);
record!(s::ExtensionSource, we::ExtensionSource { name, text });
record!(
    s::ContextRequest,
    we::ContextRequest {
        system_prompt,
        session_context,
        budget,
        query,
        extensions
    }
);
record!(
    s::ContextReport,
    we::ContextReport {
        engine,
        instructions_tokens,
        state_tokens,
        recent_tokens,
        recall_tokens,
        episode_tokens,
        tools_tokens,
        extension_tokens,
        total_tokens,
        limit_tokens,
        reserve_tokens,
        headroom_tokens,
        first_retained_seq,
        evicted_tokens,
        event_count,
        episode_count,
        episodes_shown,
        status,
        epoch_generation,
        epoch_user_turns,
        rotation_reason,
        retained_after_rotation_tokens,
        image_count,
        image_tokens,
        common_prefix_tokens,
        request_tokens,
        provider_prefix_utilization,
        measured_hit_rate
    }
);
record!(
    s::ContextView,
    we::ContextView {
        system,
        kept_messages,
        messages,
        persist,
        report
    }
);

/// Conversions for the child-policy world, whose generated types are distinct.
pub(crate) mod child {
    use super::Conv;
    use crate::engine::bindings::child_policy::latch::context::types as ct;
    use latch_engine_sdk::types as s;

    cases!(
        s::EstimatorProfile,
        ct::EstimatorProfile {
            Openai,
            Anthropic,
            CjkOptimized
        }
    );
    record!(
        s::ModelProfile,
        ct::ModelProfile {
            provider,
            model,
            context_window_tokens,
            reserve_tokens,
            estimator
        }
    );
}
