//! The frame the host puts around kernel-context text before it reaches the
//! model (see `message` in `wit/context.wit`). Kept apart from the canonical
//! renderings so the estimator can price a kernel-context message as the
//! provider receives it, frame included, without depending on them.

use crate::types::KernelContextKind;

/// The tag that opens framed kernel context; its attribute `kind` names the
/// entry's kind.
pub const KERNEL_FRAME_TAG: &str = "latch-kernel-context";

/// The wire name of a kernel-context kind, e.g. `state-update`.
pub fn kernel_kind_name(kind: KernelContextKind) -> &'static str {
    match kind {
        KernelContextKind::Snapshot => "snapshot",
        KernelContextKind::StateUpdate => "state-update",
        KernelContextKind::Extension => "extension",
        KernelContextKind::Recall => "recall",
        KernelContextKind::ArchiveIndex => "archive-index",
        KernelContextKind::Reground => "reground",
    }
}

/// Kernel-context text as the model receives it:
///
/// ```text
/// <latch-kernel-context kind="snapshot" author="context engine, not the user">
/// {text, with every `</latch-kernel-context` written `<\/latch-kernel-context`}
/// </latch-kernel-context>
/// ```
///
/// The frame depends only on the kind, so it never disturbs the provider's
/// prefix cache, and the text cannot close it early.
pub fn frame_kernel_text(kind: KernelContextKind, text: &str) -> String {
    let close = format!("</{KERNEL_FRAME_TAG}");
    let escaped = text.replace(&close, &format!("<\\/{KERNEL_FRAME_TAG}"));
    format!(
        "<{KERNEL_FRAME_TAG} kind=\"{}\" author=\"context engine, not the user\">\n{escaped}\n</{KERNEL_FRAME_TAG}>",
        kernel_kind_name(kind)
    )
}
