//! The adapter's modes (where the summary pass runs, how v2.1 ranks) and
//! the one parser of their names.

/// Where the summary pass runs when the live history plus the request does
/// not fit the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SummaryPass {
    /// After the pinned zone, which is cached and stays cached: only the
    /// request is decoded, and the next round (pinned, summary, recent)
    /// trims the cache back to the pinned prefix and decodes only what is new.
    #[default]
    PinnedPrefix,
    /// System + request on their own (nothing reused; the next round then
    /// decodes the pinned zone again). The arm the reuse is measured against.
    Standalone,
}

impl SummaryPass {
    /// Every mode, for a command line's choices.
    pub const ALL: [SummaryPass; 2] = [SummaryPass::PinnedPrefix, SummaryPass::Standalone];

    /// Its name on a command line, in settings and in events.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            SummaryPass::PinnedPrefix => "pinned_prefix",
            SummaryPass::Standalone => "standalone",
        }
    }
}

/// How v2.1 ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeltaSource {
    /// The withholding test asked of the model ([`ModelProbe`]): an answer
    /// generated per trial, Perf = the share of the full-context answer's
    /// checkable terms it keeps.
    Model,
    /// The withholding test by likelihood (the default): the model's
    /// full-context answer generated once, then each trial scores it by
    /// log-probability (no generation per trial); Perf = its per-token
    /// probability. On an engine that cannot score (Ollama) the test is
    /// asked of the model's answers instead ([`DeltaSource::Model`]).
    ///
    /// The default by measurement (docs/results.md, "The scenario suite
    /// scored by likelihood"): on the short scenarios it kept at least as
    /// much by retention R as the answers' terms on both test models
    /// (SmolLM2 0.46 against 0.44, Gemma 3 0.48 against 0.35), for the same
    /// or less evaluator time, and it ran on every scenario where SmolLM2's
    /// answers held no checkable term on three of six (Φ was used there).
    #[default]
    Likelihood,
    /// Φ-weighted influence (the ablation arm; no extra generations).
    Phi,
}

impl DeltaSource {
    /// Every source, for a command line's choices.
    pub const ALL: [DeltaSource; 3] = [DeltaSource::Model, DeltaSource::Likelihood, DeltaSource::Phi];

    /// Its name on a command line and in settings.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            DeltaSource::Model => "model",
            DeltaSource::Likelihood => "likelihood",
            DeltaSource::Phi => "phi",
        }
    }
}

/// A name that is none of an enum's values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {given:?} (one of: {choices})")]
pub struct UnknownName {
    /// What was being parsed.
    pub what: &'static str,
    /// The text given.
    pub given: String,
    /// The accepted names, comma-separated.
    pub choices: String,
}

macro_rules! named_enum {
    ($t:ty, $what:literal) => {
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $t {
            type Err = UnknownName;

            /// Parses its name (`-` and `_` alike, case ignored): the one
            /// parser every face uses (clap's `value_parser!` picks it up).
            fn from_str(s: &str) -> Result<Self, UnknownName> {
                let norm = s.trim().to_ascii_lowercase().replace('-', "_");
                <$t>::ALL.into_iter().find(|v| v.as_str() == norm).ok_or_else(|| UnknownName {
                    what: $what,
                    given: s.to_owned(),
                    choices: <$t>::ALL.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", "),
                })
            }
        }
    };
}

named_enum!(SummaryPass, "summary pass");
named_enum!(DeltaSource, "delta source");

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn modes_parse_from_one_parser() {
        for p in SummaryPass::ALL {
            assert_eq!(p.as_str().parse::<SummaryPass>().unwrap(), p);
            assert_eq!(serde_json::to_value(p).unwrap(), json!(p.as_str()));
        }
        for d in DeltaSource::ALL {
            assert_eq!(d.to_string().parse::<DeltaSource>().unwrap(), d);
            assert_eq!(serde_json::to_value(d).unwrap(), json!(d.as_str()));
        }
        assert_eq!("pinned-prefix".parse::<SummaryPass>().unwrap(), SummaryPass::PinnedPrefix);
        assert_eq!(" PHI ".parse::<DeltaSource>().unwrap(), DeltaSource::Phi);
        let e = "live".parse::<SummaryPass>().unwrap_err().to_string();
        assert!(e.contains("\"live\"") && e.contains("pinned_prefix, standalone"), "{e}");
        assert!("tau".parse::<DeltaSource>().is_err());
    }
}
