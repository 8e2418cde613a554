//! The summary pass: which request it sends (the live history, the cached
//! pinned zone, or standalone) and mf-forgetting's summariser over it.

use mf_forgetting::{ForgettingError, Message, Summarizer, SummaryRequest};
use mf_inference::{ChatMessage, GenerateRequest, Sampling, ToolSpec};

use super::{ModelCalls, SummaryPass, chat_history};
use crate::events::Purpose;

/// What replaces the log in the live summary request: the log is the
/// history right above it.
const LIVE_LOG_POINTER: &str = include_str!("prompts/live_log_pointer.txt");

/// The summary pass's sampling: the request's own (METHOD.md §2), thinking off.
#[must_use]
pub fn summary_sampling(p: mf_forgetting::SamplingParams) -> Sampling {
    Sampling { temperature: p.temperature, top_p: p.top_p, max_tokens: p.max_tokens, ..Sampling::default() }
}

/// The prompt a summary pass used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SummaryPrompt {
    /// The live history + the request with its log.
    LiveWithLog,
    /// The live history + the instruction alone (the log is the history above it).
    LiveInstruction,
    /// The cached pinned zone + the request with its log (cut to fit).
    PinnedPrefix,
    /// System + request, nothing reused.
    Standalone,
}

impl SummaryPrompt {
    /// Its name in events.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            SummaryPrompt::LiveWithLog => "live_with_log",
            SummaryPrompt::LiveInstruction => "live_instruction",
            SummaryPrompt::PinnedPrefix => "pinned_prefix",
            SummaryPrompt::Standalone => "standalone",
        }
    }
}

/// mf-forgetting's summariser over the model (see the module docs).
pub struct ModelSummarizer<'a> {
    model: ModelCalls<'a>,
    live: Vec<ChatMessage>,
    /// How many leading messages of `live` are the pinned zone.
    pinned: usize,
    tools: &'a [ToolSpec],
    pass: SummaryPass,
    /// The loop's reply reserve `G`: no request leaves less room than this
    /// for its reply, whatever its own limit (see [`ModelSummarizer::new`]).
    reserve: u32,
    /// Which prompt the last pass used.
    pub used: Option<SummaryPrompt>,
}

impl std::fmt::Debug for ModelSummarizer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelSummarizer").field("pass", &self.pass).field("used", &self.used).finish_non_exhaustive()
    }
}

impl<'a> ModelSummarizer<'a> {
    /// A summariser for compacting `history` (the live prompt, offered
    /// `tools`). Every request it sends fits the window with room for
    /// `reserve` tokens after it (the loop's `G`), or its own reply limit if
    /// that is larger: a summary pass is a call of the loop like a round, and
    /// no call of the loop goes over `C − G`.
    pub fn new(model: ModelCalls<'a>, history: &[Message], tools: &'a [ToolSpec], pass: SummaryPass, reserve: u32) -> Self {
        let pinned = mf_forgetting::message::question_index(history).map_or(1, |i| i + 1);
        ModelSummarizer { model, live: chat_history(history), pinned, tools, pass, reserve, used: None }
    }

    fn fits(&self, msgs: &[ChatMessage], tools: &[ToolSpec], out: u32) -> Result<bool, ForgettingError> {
        let n = self.model.count(msgs, tools).map_err(ForgettingError::Summarizer)?;
        Ok(n.saturating_add(out.max(self.reserve)) <= self.model.backend.context_size())
    }

    /// `prefix` + the request as one user turn, its log halved until the
    /// whole fits with `out` tokens of summary.
    fn cut_to_fit(
        &self,
        prefix: &[ChatMessage],
        tools: &[ToolSpec],
        system: Option<&str>,
        request: &SummaryRequest,
        out: u32,
    ) -> Result<Vec<ChatMessage>, ForgettingError> {
        let mut user = request.user.clone();
        loop {
            let mut msgs = prefix.to_vec();
            match system {
                Some(sys) => {
                    msgs.push(ChatMessage::system(sys.to_owned()));
                    msgs.push(ChatMessage::user(user.clone()));
                }
                None => msgs.push(ChatMessage::user(format!("{}\n\n{user}", request.system))),
            }
            if self.fits(&msgs, tools, out)? {
                return Ok(msgs);
            }
            let n = user.chars().count();
            if n < 200 {
                return Err(ForgettingError::Summarizer("the summary request does not fit the context window".into()));
            }
            user = user.chars().take(n / 2).collect();
        }
    }

    /// The request the pass sends for `request` (and which prompt that is):
    /// what [`Summarizer::summarize`] generates from.
    ///
    /// # Errors
    /// When counting fails or nothing fits the window.
    pub fn request_for(&self, request: &SummaryRequest) -> Result<(GenerateRequest, SummaryPrompt), ForgettingError> {
        let out = request.params.max_tokens;
        // Preferred: an append to the live prompt, so the cached prefix is
        // reused: first with the error-aware log, then (when that does not
        // fit) with the instruction alone, the history being right above it.
        let with_log = format!("{}\n\n{}", request.system, request.user);
        let without_log = format!("{}\n\n{}", request.system, instruction_only(&request.user));
        let mut chosen = None;
        for (instruction, kind) in [(with_log, SummaryPrompt::LiveWithLog), (without_log, SummaryPrompt::LiveInstruction)] {
            let mut live = self.live.clone();
            live.push(ChatMessage::user(instruction));
            if self.fits(&live, self.tools, out)? {
                chosen = Some((live, self.tools.to_vec(), kind));
                break;
            }
        }
        let (messages, tools, kind) = match (chosen, self.pass) {
            (Some(c), _) => c,
            // The pinned zone (system prompt with the tools, the question) is
            // at the head of the cache and is kept by the compaction: append
            // the request to it. The compressible and recent tail of the
            // cache is trimmed, which the next round would do anyway.
            (None, SummaryPass::PinnedPrefix) => {
                let pinned = &self.live[..self.pinned.min(self.live.len())];
                (self.cut_to_fit(pinned, self.tools, None, request, out)?, self.tools.to_vec(), SummaryPrompt::PinnedPrefix)
            }
            (None, SummaryPass::Standalone) => (self.cut_to_fit(&[], &[], Some(&request.system), request, out)?, Vec::new(), SummaryPrompt::Standalone),
        };
        Ok((GenerateRequest { messages, tools, sampling: summary_sampling(request.params) }, kind))
    }
}

impl Summarizer for ModelSummarizer<'_> {
    fn summarize(&mut self, request: &SummaryRequest) -> Result<String, ForgettingError> {
        let (req, kind) = self.request_for(request)?;
        self.used = Some(kind);
        let offered_tools = !req.tools.is_empty();
        let g = self.model.generate(req.messages, req.tools, req.sampling, Purpose::Summary).map_err(ForgettingError::Summarizer)?;
        let called_a_tool = !g.tool_calls.is_empty() || g.tool_parse_error.is_some();
        if !called_a_tool {
            return Ok(g.content);
        }
        if !offered_tools {
            return Err(ForgettingError::Summarizer("the summary pass called a tool".into()));
        }
        // A prompt that offers tools (the live history, the pinned zone) can
        // draw a small model into calling one instead of summarising: ask
        // once more with the request alone and no tools, before the
        // 500-character fallback.
        let out = request.params.max_tokens;
        let messages = self.cut_to_fit(&[], &[], Some(&request.system), request, out)?;
        self.used = Some(SummaryPrompt::Standalone);
        let g = self.model.generate(messages, Vec::new(), summary_sampling(request.params), Purpose::Summary).map_err(ForgettingError::Summarizer)?;
        if !g.tool_calls.is_empty() || g.tool_parse_error.is_some() {
            return Err(ForgettingError::Summarizer("the summary pass called a tool, also when asked without tools".into()));
        }
        Ok(g.content)
    }
}

/// The summary request without its log (`mf_forgetting::summary::build_request`
/// writes "Original question … Log to summarise: … Also: …"): for the live
/// append, where the log is the history right above.
fn instruction_only(user: &str) -> String {
    const LOG: &str = "\n\nLog to summarise:\n";
    let Some(start) = user.find(LOG) else { return user.to_owned() };
    let rest = &user[start + LOG.len()..];
    let tail = rest.find("\n\nAlso:\n").or_else(|| rest.rfind("\nWrite the bullet points now.")).map_or("", |i| &rest[i..]);
    format!("{}\n\n{LIVE_LOG_POINTER}{tail}", &user[..start])
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_live_instruction_drops_only_the_log() {
        let r = mf_forgetting::summary::build_request("Why?", "[m2 tool-result] x\n[m3 tool-error] y", &["fold m3".to_owned()], Default::default());
        let i = instruction_only(&r.user);
        assert!(i.starts_with("Original question: Why?"));
        assert!(!i.contains("[m2 tool-result]"));
        assert!(i.contains("- fold m3"));
        assert!(i.ends_with("Write the bullet points now."));
        let r = mf_forgetting::summary::build_request("Why?", "[m2 tool-result] x", &[], Default::default());
        assert!(instruction_only(&r.user).ends_with("after the original question.\nWrite the bullet points now."));
    }

    #[test]
    fn the_log_pointer_is_the_file_without_a_trailing_newline() {
        assert!(!LIVE_LOG_POINTER.ends_with('\n'), "{LIVE_LOG_POINTER:?}");
    }
}
