#![no_main]
use latch_provider::openai::MaxTokensField;
use latch_provider::{ProviderKind, Wire};
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    latch_fuzz::decoder(
        Wire::Chat(MaxTokensField::MaxTokens),
        ProviderKind::OpenAiCompatible,
        data,
    )
});
