//! Usage: what the provider reported for each request, next to Latch's own
//! estimate of the prefix it could reuse, and the cache metrics the spec
//! keeps apart (prefix utilization and measured hit rate). Unknown
//! categories stay unknown, never zero.

use latch_kernel::EventKind;

/// One request's provider-reported usage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestUsage {
    /// Sequence number of the usage event.
    pub seq: u64,
    /// Input tokens (reported), when the provider reported them.
    pub input_tokens: Option<u64>,
    /// Output tokens (reported), when the provider reported them.
    pub output_tokens: Option<u64>,
    /// Tokens read from the provider's cache (reported), when known.
    pub cache_read_tokens: Option<u64>,
    /// Tokens written to the cache (reported), when known.
    pub cache_creation_tokens: Option<u64>,
    /// Cache misses (reported), when known.
    pub cache_miss_tokens: Option<u64>,
    /// Latch's estimate of the prefix shared with the previous request.
    pub estimated_prefix_tokens: Option<u64>,
    /// The model the request was for, when recorded.
    pub model: Option<String>,
}

impl RequestUsage {
    /// Provider prefix utilization: cache reads ÷ the estimated prefix.
    pub fn prefix_utilization(&self) -> Option<f64> {
        match (self.cache_read_tokens, self.estimated_prefix_tokens) {
            (Some(read), Some(prefix)) if prefix > 0 => Some(read as f64 / prefix as f64),
            _ => None,
        }
    }
}

/// The usage reducer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    requests: Vec<RequestUsage>,
    input: u64,
    output: u64,
    /// Requests that reported input (output) tokens.
    input_reported: u64,
    output_reported: u64,
    read: u64,
    miss: u64,
    /// Requests whose cache reads and misses were both reported.
    measured: u64,
}

impl Usage {
    /// Apply one of the session's own events.
    pub fn apply(&mut self, seq: u64, event: &EventKind) {
        if let EventKind::ProviderUsage {
            input_tokens,
            output_tokens,
            cache_read_tokens,
            cache_creation_tokens,
            cache_miss_tokens,
            common_prefix_tokens,
            model,
            ..
        } = event
        {
            // A provider that did not report a count adds nothing to the
            // totals, and the request's record keeps it unknown.
            if let Some(n) = input_tokens {
                self.input += n;
                self.input_reported += 1;
            }
            if let Some(n) = output_tokens {
                self.output += n;
                self.output_reported += 1;
            }
            if let (Some(r), Some(m)) = (cache_read_tokens, cache_miss_tokens) {
                self.read += r;
                self.miss += m;
                self.measured += 1;
            }
            self.requests.push(RequestUsage {
                seq,
                input_tokens: *input_tokens,
                output_tokens: *output_tokens,
                cache_read_tokens: *cache_read_tokens,
                cache_creation_tokens: *cache_creation_tokens,
                cache_miss_tokens: *cache_miss_tokens,
                estimated_prefix_tokens: *common_prefix_tokens,
                model: model.clone(),
            });
        }
    }

    /// Every request, oldest first.
    pub fn requests(&self) -> &[RequestUsage] {
        &self.requests
    }

    /// The latest request.
    pub fn last(&self) -> Option<&RequestUsage> {
        self.requests.last()
    }

    /// Input and output tokens over the session (what was reported; a
    /// request that reported none adds nothing).
    pub fn totals(&self) -> (u64, u64) {
        (self.input, self.output)
    }

    /// Input and output tokens over the session, each unknown (`None`)
    /// when no request reported it.
    pub fn reported_totals(&self) -> (Option<u64>, Option<u64>) {
        (
            (self.input_reported > 0).then_some(self.input),
            (self.output_reported > 0).then_some(self.output),
        )
    }

    /// Measured provider cache hit rate over the requests that reported
    /// both reads and misses: reads ÷ (reads + misses); unknown without one.
    pub fn hit_rate(&self) -> Option<f64> {
        (self.measured > 0 && self.read + self.miss > 0)
            .then(|| self.read as f64 / (self.read + self.miss) as f64)
    }
}
