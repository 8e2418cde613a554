//! One reply's tool calls: ids, validation, approval, execution, and the
//! results that go back into the history.

use mf_forgetting::{ExitEvent, ExitMonitor, Message};
use mf_tools::Requirement;

use super::Agent;
use crate::events::{AgentEvent, EventSink, ExitReason};
use crate::tools::{FailureKind, ToolFailure, ToolReply};

/// JSON Schema keywords that small models copy from a tool's description
/// into its arguments (`"additionalProperties": {...}`, `"type": "json"`).
const SCHEMA_KEYWORDS: [&str; 6] = ["additionalProperties", "type", "properties", "required", "description", "$schema"];

/// Drops top-level argument keys that are JSON Schema keywords and not
/// properties the tool declares; everything else is left for the tool to
/// validate (and refuse).
#[must_use]
pub fn repair_arguments(schema: &serde_json::Value, args: &serde_json::Value) -> serde_json::Value {
    let (Some(props), Some(obj)) = (schema.get("properties").and_then(|p| p.as_object()), args.as_object()) else {
        return args.clone();
    };
    let kept = obj.iter().filter(|(k, _)| props.contains_key(k.as_str()) || !SCHEMA_KEYWORDS.contains(&k.as_str()));
    serde_json::Value::Object(kept.map(|(k, v)| (k.clone(), v.clone())).collect())
}

/// The arguments as the JSON text the tool receives.
fn arguments_json(agent: &Agent, call: &mf_inference::ToolCall) -> String {
    match &call.arguments {
        serde_json::Value::String(s) => s.clone(),
        v => {
            let spec = agent.specs.iter().find(|t| t.name == call.name);
            spec.map_or_else(|| v.to_string(), |s| repair_arguments(&s.parameters, v).to_string())
        }
    }
}

/// Gives every call an id that no earlier message and no other call of this
/// reply uses (the parser's when it is unique and non-empty, else ours).
pub(super) fn unique_ids(calls: &mut [mf_inference::ToolCall], history: &[Message], round: u32) {
    let mut seen: Vec<String> = history.iter().flat_map(|m| m.tool_calls.iter().map(|t| t.id.clone())).collect();
    for (i, c) in calls.iter_mut().enumerate() {
        if c.id.is_empty() || seen.contains(&c.id) {
            let mut id = format!("call_{round}_{i}");
            let mut n = 0;
            while seen.contains(&id) {
                n += 1;
                id = format!("call_{round}_{i}_{n}");
            }
            c.id = id;
        }
        seen.push(c.id.clone());
    }
}

impl Agent {
    /// The history entry of one call: its arguments, or for arguments over
    /// the size limit a short note (they are refused, and keeping them whole
    /// would spend the window on what was never run).
    fn history_call(&self, call: &mf_inference::ToolCall) -> mf_forgetting::ToolCall {
        let size = arguments_json(self, call).len();
        let arguments = if size > self.settings.max_argument_bytes {
            serde_json::json!({ "omitted": format!("{size} bytes of arguments, refused: the limit is {} bytes", self.settings.max_argument_bytes) })
        } else {
            call.arguments.clone()
        };
        mf_forgetting::ToolCall { id: call.id.clone(), name: call.name.clone(), arguments }
    }

    /// Records a reply that calls tools and runs its calls in order; the
    /// results go into `history`. Returns the exit a call triggered, if any
    /// (a repeated call, too many consecutive errors).
    pub(super) async fn dispatch(
        &mut self,
        reply_content: &str,
        mut calls: Vec<mf_inference::ToolCall>,
        history: &mut Vec<Message>,
        monitor: &mut ExitMonitor,
        round: u32,
        sink: &mut dyn EventSink,
    ) -> Option<ExitReason> {
        unique_ids(&mut calls, history, round);
        let id = self.id();
        let recorded = calls.iter().map(|c| self.history_call(c)).collect();
        history.push(Message::assistant_calls(&id, reply_content, recorded));
        sink.history(history);
        // A crash during the tools can resume from here without decoding again.
        self.save_resume_point(round, sink).await;
        let mut exit: Option<ExitReason> = None;
        for call in &calls {
            let shown =
                history.last().and_then(|m| m.tool_calls.iter().find(|t| t.id == call.id)).map_or_else(|| call.arguments.clone(), |t| t.arguments.clone());
            sink.emit(&AgentEvent::ToolCall { call_id: call.id.clone(), name: call.name.clone(), arguments: shown });
            let result = if exit.is_some() {
                Err(ToolFailure::new(FailureKind::NotRun, "the investigation is stopping"))
            } else if let Some(r) = monitor.observe(&ExitEvent::ToolCall { name: call.name.clone(), arguments: call.arguments.clone() }) {
                exit = Some(ExitReason::from(r));
                Err(ToolFailure::new(FailureKind::RepeatedCall, "this exact call was already made; its result is above"))
            } else {
                self.run_call(call, sink).await
            };
            let id = self.id();
            let (msg, ev) = match result {
                Ok(reply) => {
                    let (content, truncated) = self.cut(reply);
                    (
                        Message::tool_result(&id, &call.id, &call.name, &content),
                        AgentEvent::ToolResult { call_id: call.id.clone(), name: call.name.clone(), ok: true, error: None, content, truncated },
                    )
                }
                Err(f) => (
                    Message::tool_error(&id, &call.id, &call.name, &f.to_model_text()),
                    AgentEvent::ToolResult {
                        call_id: call.id.clone(),
                        name: call.name.clone(),
                        ok: false,
                        error: Some(f.kind.as_str().to_owned()),
                        content: f.to_model_text(),
                        truncated: None,
                    },
                ),
            };
            let is_error = msg.is_error;
            history.push(msg);
            sink.emit(&ev);
            sink.history(history);
            if exit.is_none()
                && let Some(r) = monitor.observe(&ExitEvent::ToolResult { is_error })
            {
                exit = Some(ExitReason::from(r));
            }
        }
        exit
    }

    /// Cuts a result to `max_result_chars`, with a note.
    fn cut(&self, reply: ToolReply) -> (String, Option<String>) {
        let n = reply.content.chars().count();
        let max = self.settings.max_result_chars;
        if n > max {
            let head: String = reply.content.chars().take(max).collect();
            let mut note = format!("result cut to {max} of {n} characters");
            if let Some(t) = reply.truncated {
                note = format!("{t}; {note}");
            }
            (format!("{head}\n[{note}]"), Some(note))
        } else if let Some(t) = reply.truncated {
            (format!("{}\n[{t}]", reply.content), Some(t))
        } else {
            (reply.content, None)
        }
    }

    /// Validates, approves and runs one call; every refusal is a structured error.
    /// After the user answered an MCP call: when the answer was "always",
    /// remembers it for the call's server and tool for the rest of the
    /// session. Returns who decided, for the decision event.
    fn remember_tool_answer(&self, req: &mf_tools::policy::ApprovalRequest, scope: crate::tools::Scope, approve: bool, sink: &mut dyn EventSink) -> String {
        let Some(origin) = req.mcp.as_ref().filter(|_| scope == crate::tools::Scope::Tool) else { return "user".into() };
        match self.tools.remember_tool(&req.tool, approve) {
            Ok(()) => format!("user, always for {} on {}", origin.tool, origin.server),
            Err(f) => {
                sink.emit(&AgentEvent::Error { message: format!("the answer could not be remembered: {}", f.message) });
                "user".into()
            }
        }
    }

    async fn run_call(&self, call: &mf_inference::ToolCall, sink: &mut dyn EventSink) -> Result<ToolReply, ToolFailure> {
        if !self.specs.iter().any(|t| t.name == call.name) {
            let names: Vec<&str> = self.specs.iter().map(|t| t.name.as_str()).collect();
            return Err(ToolFailure::new(FailureKind::UnknownTool, format!("no tool named `{}`; available: {}", call.name, names.join(", "))));
        }
        let args_json = arguments_json(self, call);
        if args_json.len() > self.settings.max_argument_bytes {
            return Err(ToolFailure::new(
                FailureKind::ArgumentsTooLarge,
                format!("{} bytes of arguments, the limit is {}; they were not kept", args_json.len(), self.settings.max_argument_bytes),
            ));
        }
        let decided = |approved: bool, by: &str| AgentEvent::ApprovalDecided { call_id: call.id.clone(), approved, by: by.into() };
        let approval = match self.tools.requirement(&call.id, &call.name, &args_json) {
            Err(f) => {
                if f.kind == FailureKind::DeniedByPolicy {
                    sink.emit(&decided(false, "policy"));
                }
                return Err(f);
            }
            Ok(Requirement::Auto) => {
                sink.emit(&decided(true, "policy"));
                None
            }
            Ok(Requirement::Ask(req)) => {
                sink.emit(&AgentEvent::ApprovalRequested {
                    call_id: req.call_id.clone(),
                    name: req.tool.clone(),
                    arguments: req.arguments.clone(),
                    args_sha256: req.args_sha256.clone(),
                    summary: req.summary.clone(),
                    host: req.host.clone(),
                    mcp: req.mcp.as_ref().map(|o| crate::events::McpOrigin { server: o.server.clone(), tool: o.tool.clone() }),
                });
                match self.approver.decide(&req).await {
                    None => {
                        sink.emit(&decided(false, "no answer"));
                        return Err(ToolFailure::new(FailureKind::ApprovalDenied, "the user did not answer; the call was not run"));
                    }
                    Some(d) if d.approval.call_id != req.call_id || d.approval.args_sha256 != req.args_sha256 => {
                        sink.emit(&decided(false, "mismatch"));
                        return Err(ToolFailure::new(FailureKind::ApprovalMismatch, "the approval was for another call; not run"));
                    }
                    Some(d) if !d.approved() => {
                        let by = self.remember_tool_answer(&req, d.scope, false, sink);
                        sink.emit(&decided(false, &by));
                        return Err(ToolFailure::new(FailureKind::ApprovalDenied, "the user denied this call"));
                    }
                    Some(d) if req.mcp.is_some() => {
                        let by = self.remember_tool_answer(&req, d.scope, true, sink);
                        sink.emit(&decided(true, &by));
                        Some(d.approval)
                    }
                    Some(d) => {
                        // "Allow this host for the session": later calls to it run unasked.
                        let host = req.host.as_deref().filter(|_| d.scope == crate::tools::Scope::Host);
                        match host.map(|h| self.tools.approve_host(h)) {
                            Some(Ok(())) => sink.emit(&decided(true, "user, for this host")),
                            Some(Err(f)) => {
                                sink.emit(&decided(true, "user"));
                                sink.emit(&AgentEvent::Error { message: format!("the host could not be approved for the session: {}", f.message) });
                            }
                            None => sink.emit(&decided(true, "user")),
                        }
                        Some(d.approval)
                    }
                }
            }
        };
        self.tools.run(&call.id, &call.name, &args_json, approval.as_ref()).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn schema_keywords_copied_into_arguments_are_dropped() {
        let schema = serde_json::json!({"type": "object", "properties": {"url": {}, "method": {}, "body": {}}});
        let args = serde_json::json!({"url": "u", "additionalProperties": {"description": "x"}, "type": "json", "colour": 1});
        assert_eq!(repair_arguments(&schema, &args), serde_json::json!({"url": "u", "colour": 1}));
        let with_type = serde_json::json!({"type": "x"});
        let schema = serde_json::json!({"properties": {"type": {}}});
        assert_eq!(repair_arguments(&schema, &with_type), with_type, "a declared property stays");
    }

    #[test]
    fn calls_of_one_reply_never_share_an_id() {
        let call = |id: &str| mf_inference::ToolCall { id: id.into(), name: "t".into(), arguments: serde_json::json!({}) };
        let history =
            vec![Message::assistant_calls("m2", "", vec![mf_forgetting::ToolCall { id: "a".into(), name: "t".into(), arguments: serde_json::json!({}) }])];
        let mut calls = vec![call("x"), call("x"), call(""), call("a"), call("call_3_0")];
        unique_ids(&mut calls, &history, 3);
        let ids: Vec<&str> = calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids[0], "x", "a unique parser id is kept");
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), ids.len(), "{ids:?}");
        assert!(!ids.contains(&"a"), "an id of an earlier message is replaced: {ids:?}");
    }
}
