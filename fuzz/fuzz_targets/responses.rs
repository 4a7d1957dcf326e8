#![no_main]
use latch_provider::{ProviderKind, Wire};
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    latch_fuzz::decoder(Wire::Responses, ProviderKind::OpenAi, data)
});
