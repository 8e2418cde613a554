//! Markdown tables from a results file (`bench-forgetting report`), also
//! printed as the terminal's human-readable table.

use std::fmt::Write as _;

use crate::results::{ModelResult, Stat};

fn pm(s: &Stat, reps: u32) -> String {
    if reps > 1 { format!("{:.2} ± {:.2}", s.mean, s.sd) } else { format!("{:.2}", s.mean) }
}

/// Renders every model's tables.
pub fn markdown(results: &[ModelResult]) -> String {
    let mut out = String::new();
    for r in results {
        model_markdown(&mut out, r);
    }
    out
}

fn model_markdown(out: &mut String, r: &ModelResult) {
    let st = &r.settings;
    let _ = writeln!(out, "### {}\n", r.model);
    let _ = writeln!(
        out,
        "{} scenarios, {} answers, {} rep(s); backend {}, n_ctx {}; compaction budget C={} G={} recent={}; probes at temperature {}, ≤ {} tokens, thinking {}; judge: {}; v2.1 withholding test: {}; wall {:.0} s.\n",
        st.scenarios.len(),
        r.scores.len(),
        st.reps,
        st.backend,
        st.n_ctx,
        st.budget_context,
        st.budget_reserve,
        st.budget_recent,
        st.temperature,
        st.answer_max_tokens,
        st.thinking,
        st.judge_model.as_deref().unwrap_or("none"),
        if st.withholding_budget == 0 { "exact (one evaluation per unit)".to_owned() } else { format!("≤ {} evaluations per compaction", st.withholding_budget) },
        r.wall_s
    );
    let _ = writeln!(out, "| condition | keyword (0–3) | judge (0–3) | worst keyword | prompt tokens before → after | fallbacks | not applied | empty answers | over budget |");
    let _ = writeln!(out, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for c in &r.conditions {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.0} | {:.0} → {:.0} | {} | {} | {} | {} |",
            c.condition,
            pm(&c.keyword, st.reps),
            c.judge.as_ref().map_or("–".to_owned(), |j| pm(j, st.reps)),
            c.keyword.min,
            c.tokens_before,
            c.tokens_after,
            c.fallbacks,
            c.not_applied,
            c.empty_answers,
            c.compaction_failures
        );
    }
    let b = &r.control_brackets;
    let _ = writeln!(out, "\nControl brackets ({} probes; expected: identical 3, paraphrase high, contradiction low, empty 0):\n", b.probes);
    let _ = writeln!(out, "| scorer | identical | paraphrase | contradiction | empty |");
    let _ = writeln!(out, "| --- | ---: | ---: | ---: | ---: |");
    for (name, m) in [("keyword", &b.keyword), ("judge", &b.judge)] {
        if m.is_empty() {
            continue;
        }
        let g = |k: &str| m.get(k).map_or("–".to_owned(), |v| format!("{v:.2}"));
        let _ = writeln!(out, "| {name} | {} | {} | {} | {} |", g("identical"), g("paraphrase"), g("contradiction"), g("empty"));
    }
    if b.judge_unparsed > 0 {
        let _ = writeln!(out, "\nJudge replies without a grade on controls: {}.", b.judge_unparsed);
    }
    let conds: Vec<&str> = r.conditions.iter().map(|c| c.condition.as_str()).collect();
    for (title, kw, j) in [
        ("By class", &r.by_class, r.judge.as_ref().map(|a| &a.by_class)),
        ("By dimension", &r.by_dimension, r.judge.as_ref().map(|a| &a.by_dimension)),
    ] {
        let _ = writeln!(out, "\n{title} (keyword{}):\n", if j.is_some() { " / judge" } else { "" });
        let _ = writeln!(out, "| | {} |", conds.join(" | "));
        let _ = writeln!(out, "| --- |{}", " ---: |".repeat(conds.len()));
        for (k, m) in kw {
            let cells: Vec<String> = conds
                .iter()
                .map(|c| {
                    let a = m.get(*c).map_or("–".to_owned(), |v| format!("{v:.2}"));
                    match j.and_then(|j| j.get(k)).and_then(|jm| jm.get(*c)) {
                        Some(v) => format!("{a} / {v:.2}"),
                        None if j.is_some() => format!("{a} / –"),
                        None => a,
                    }
                })
                .collect();
            let _ = writeln!(out, "| {k} | {} |", cells.join(" | "));
        }
    }
    let _ = writeln!(out, "\nWorst cells (scenario × condition, lowest keyword mean first):\n");
    let _ = writeln!(out, "| scenario | condition | keyword mean | keyword min | judge mean | judge min |");
    let _ = writeln!(out, "| --- | --- | ---: | ---: | ---: | ---: |");
    for c in r.worst_cells.iter().take(8) {
        let _ = writeln!(
            out,
            "| {} | {} | {:.2} | {} | {} | {} |",
            c.scenario,
            c.condition,
            c.keyword_mean,
            c.keyword_min,
            c.judge_mean.map_or("–".to_owned(), |v| format!("{v:.2}")),
            c.judge_min.map_or("–".to_owned(), |v| v.to_string())
        );
    }
    let sp = &r.speed;
    let ratio = |x: Option<f64>| x.map_or("n/a (backend reports no KV figures)".to_owned(), |v| format!("{:.1} %", 100.0 * v));
    let _ = writeln!(out, "\nPrefill: probes decoded {} of a naive resend; all calls {}.", ratio(sp.probe_prefill_ratio), ratio(sp.total_prefill_ratio));
    let _ = writeln!(out, "\n| calls | n | prompt tokens | decoded | generated | at max_tokens | wall s |");
    let _ = writeln!(out, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (k, c) in &sp.calls {
        let _ = writeln!(
            out,
            "| {k} | {} | {} | {} | {} | {} | {:.0} |",
            c.calls,
            c.prompt_tokens,
            c.decoded_tokens,
            c.completion_tokens,
            c.hit_max_tokens,
            c.wall_ms as f64 / 1000.0
        );
    }
    let _ = writeln!(out, "\nEmpty answers caused by the token budget: {}.\n", r.empty_by_budget);
}
