//! The `keyword` scorer (0–3, paper-compatible rule, stricter matching).
//!
//! Rule (the scenario format's): every required keyword group found → 3;
//! otherwise the number of groups found among required + partial: 0 → 0,
//! 1 → 1, 2 or more → 2. A group is one keyword or a list of accepted
//! variants; any variant counts.
//!
//! Matching is done on a normalised text, so the scorer does not depend on
//! how a model happens to write a number or a unit:
//! - lower case; typographic dashes and quotes folded to ASCII;
//! - digit-group separators removed (`6,404`, `6 404`, `6 404`, `6_404`,
//!   `6'404` → `6404`), decimal points kept;
//! - an ISO timestamp's `T` read as a space (`2026-12-01T02:11` holds `02:11`);
//! - the space between a number and its unit removed (`12 ms` → `12ms`,
//!   `40 %` / `40 percent` → `40%`);
//! - a keyword must start on a word boundary, and a keyword ending in a digit
//!   must end on one too, so `404` does not match inside `6404` nor `40` inside
//!   `400` (plain substring matching, the paper's, let both through);
//! - numbers match in the forms writers use: `1,234.50`, `1234.5 ms` and
//!   `$1,234` count for an expected `1234` (thousands separators, a decimal
//!   tail, a unit), `6.40` for `6.4`; `12345` and `0.1234` do not.

/// Normalises a text (answer or keyword) for matching.
pub fn normalise(text: &str) -> String {
    let lower = text.to_lowercase();
    let folded: Vec<char> = lower
        .chars()
        .map(|c| match c {
            '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
            '\u{2018}' | '\u{2019}' | '\u{2032}' => '\'',
            '\u{201C}' | '\u{201D}' => '"',
            '\u{00A0}' | '\u{2009}' | '\u{202F}' | '\u{2007}' => ' ',
            c => c,
        })
        .collect();
    // An ISO timestamp's `T` between the date and the time reads as a space
    // (`2026-12-01T02:11` → `2026-12-01 02:11`), so a time matches on its own.
    let folded: Vec<char> = folded
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            let iso_t = c == 't'
                && i > 0
                && folded[i - 1].is_ascii_digit()
                && folded.get(i + 1..i + 4).is_some_and(|w| w[0].is_ascii_digit() && w[1].is_ascii_digit() && w[2] == ':');
            if iso_t { ' ' } else { c }
        })
        .collect();
    // Remove group separators between digits: a digit, one separator, then exactly three digits
    // that are not followed by another digit (so "1,2" and "3.14" stay).
    let mut out: Vec<char> = Vec::with_capacity(folded.len());
    let n = folded.len();
    let mut i = 0;
    while i < n {
        let c = folded[i];
        let is_sep = matches!(c, ',' | ' ' | '_' | '\'');
        if is_sep
            && i > 0
            && folded[i - 1].is_ascii_digit()
            && i + 3 < n + 1
            && folded.get(i + 1..i + 4).is_some_and(|s| s.iter().all(char::is_ascii_digit))
            && !folded.get(i + 4).is_some_and(char::is_ascii_digit)
            && first_group_ok(&folded[..i])
        {
            i += 1;
            continue;
        }
        out.push(c);
        i += 1;
    }
    let mut s: String = out.into_iter().collect();
    s = s.replace(" percent", "%").replace(" per cent", "%");
    // Join a number and a following unit or percent sign.
    let chars: Vec<char> = s.chars().collect();
    let mut joined = String::with_capacity(s.len());
    for (i, &c) in chars.iter().enumerate() {
        if c == ' ' && i > 0 && chars[i - 1].is_ascii_digit() && chars.get(i + 1).is_some_and(|&d| d == '%' || is_unit_start(&chars[i + 1..])) {
            continue;
        }
        joined.push(c);
    }
    joined.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether the digits just before a separator can be a digit group: at most
/// three, and not glued to a word or a decimal point (`p99 850` is two tokens).
fn first_group_ok(before: &[char]) -> bool {
    let run = before.iter().rev().take_while(|c| c.is_ascii_digit()).count();
    let prev = before.len().checked_sub(run + 1).map(|k| before[k]);
    run <= 3 && !prev.is_some_and(|c| c.is_alphabetic() || c == '.')
}

/// Units that are glued to their number after normalisation.
const UNITS: [&str; 27] = [
    "ms", "s", "sec", "secs", "seconds", "min", "mins", "minutes", "h", "hours", "kb", "mb", "gb", "tb", "kib", "mib", "gib", "tib", "b", "bytes", "rps",
    "qps", "req/s", "usd", "eur", "x", "ns",
];

fn is_unit_start(rest: &[char]) -> bool {
    let word: String = rest.iter().take_while(|c| c.is_alphanumeric() || **c == '/').collect();
    UNITS.contains(&word.as_str())
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric()
}

/// Whether the normalised `needle` occurs in the normalised `hay` on the boundaries described above.
pub fn contains_keyword(hay: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return false;
    }
    let first = needle.chars().next().unwrap_or(' ');
    let last = needle.chars().last().unwrap_or(' ');
    let mut from = 0;
    while let Some(p) = hay[from..].find(needle) {
        let start = from + p;
        let end = start + needle.len();
        let before = hay[..start].chars().next_back();
        let left_ok = !is_word(first) || !before.is_some_and(|b| is_word(b) || (first.is_ascii_digit() && b == '.'));
        let right_ok = !last.is_ascii_digit() || number_ends(needle, &hay[end..]);
        if left_ok && right_ok {
            return true;
        }
        from = start + first.len_utf8();
    }
    false
}

/// Whether a number keyword (`needle`, ending in a digit) found just before
/// `rest` ends there as a number: no further digit, except a decimal tail
/// that writers add — any decimals after an integer keyword (`1234.50` for
/// `1234`), trailing zeros after a decimal one (`6.40` for `6.4`).
fn number_ends(needle: &str, rest: &str) -> bool {
    let mut chars = rest.chars();
    match chars.next() {
        Some(c) if c.is_ascii_digit() => needle.contains('.') && rest.chars().take_while(char::is_ascii_digit).all(|d| d == '0'),
        Some('.') => {
            let digits: String = chars.take_while(char::is_ascii_digit).collect();
            // A full stop ends a sentence; a decimal tail must hold digits.
            digits.is_empty() || !needle.contains('.')
        }
        _ => true,
    }
}

/// Whether any variant of a keyword group matches the (raw) answer.
pub fn group_matches(answer_norm: &str, group: &mf_forgetting::scenario::Keyword) -> bool {
    group.variants().iter().any(|v| contains_keyword(answer_norm, &normalise(v)))
}

/// The keyword score 0–3 of an answer.
pub fn score(answer: &str, required: &[mf_forgetting::scenario::Keyword], partial: &[mf_forgetting::scenario::Keyword]) -> u8 {
    let a = normalise(answer);
    let req = required.iter().filter(|k| group_matches(&a, k)).count();
    if !required.is_empty() && req == required.len() {
        return 3;
    }
    let part = partial.iter().filter(|k| group_matches(&a, k)).count();
    match req + part {
        0 => 0,
        1 => 1,
        _ => 2,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use mf_forgetting::scenario::Keyword;

    use super::*;

    fn one(s: &str) -> Keyword {
        Keyword::One(s.to_owned())
    }

    #[test]
    fn separators_are_normalised() {
        for a in ["6,404 rows", "6 404 rows", "6\u{202F}404 rows", "6_404 rows", "6'404 rows", "6404 rows"] {
            assert_eq!(score(a, &[one("6404")], &[]), 3, "{a}");
            assert_eq!(score(a, &[one("6,404")], &[]), 3, "{a}");
        }
        // Decimals and lists are not groups.
        assert_eq!(normalise("3.14 and 1,2"), "3.14 and 1,2");
        assert_eq!(normalise("1,234,567"), "1234567");
        assert_eq!(score("1,2", &[one("12")], &[]), 0);
        // A run of four digits is not a first group: a year next to a count stays two numbers.
        assert_eq!(normalise("in 2024 100 users"), "in 2024 100 users");
        assert_eq!(normalise("p99 850 ms"), "p99 850ms");
    }

    #[test]
    fn numbers_match_on_boundaries() {
        assert_eq!(score("build 6404 failed", &[one("404")], &[]), 0);
        assert_eq!(score("status 404", &[one("404")], &[]), 3);
        assert_eq!(score("latency 400 ms", &[one("40")], &[]), 0);
        assert_eq!(score("latency 40.5 ms", &[one("40")], &[]), 3, "a decimal tail counts");
        assert_eq!(score("it took 40.", &[one("40")], &[]), 3);
        assert_eq!(score("#4817", &[one("4817")], &[]), 3);
        // Words may take a suffix (plural), not a prefix.
        assert_eq!(score("three builds", &[one("build")], &[]), 3);
        assert_eq!(score("rebuild", &[one("build")], &[]), 0);
    }

    #[test]
    fn numbers_in_the_forms_writers_use() {
        // (answer, expected keyword, matches)
        let table: &[(&str, &str, bool)] = &[
            ("1,234.50", "1234", true),
            ("1234.5 ms", "1234", true),
            ("1234.5ms", "1234", true),
            ("$1,234", "1234", true),
            ("EUR 84,213.50 was refunded", "84213", true),
            ("1 234,5", "1234", true),
            ("took 1234 ms.", "1234", true),
            ("it was 1234.", "1234", true),
            ("(1234)", "1234", true),
            ("12345", "1234", false),
            ("12,345", "1234", false),
            ("12,345", "2345", false),
            ("0.1234", "1234", false),
            ("v1234", "1234", false),
            ("6.40 %", "6.4", true),
            ("6.4%", "6.4", true),
            ("6.45", "6.4", false),
            ("16.4", "6.4", false),
            ("6.4.1", "6.4", false),
            ("1,284,300 requests", "1284300", true),
            ("1,284,300 requests", "1,284,300", true),
            ("1284300.0", "1284300", true),
            ("1.5 s", "1.5s", true),
            ("02:09:12", "02:09", true),
            ("02:091", "02:09", false),
            ("2026-12-01T02:11:00Z", "02:11", true),
            ("2026-12-01T02:11:00Z", "2026-12-01", true),
            ("at02:11", "02:11", false),
        ];
        for &(answer, keyword, want) in table {
            assert_eq!(score(answer, &[one(keyword)], &[]) == 3, want, "{answer:?} for {keyword:?}");
        }
    }

    #[test]
    fn units_and_percent_are_normalised() {
        assert_eq!(score("p99 was 850ms", &[one("850 ms")], &[]), 3);
        assert_eq!(score("p99 was 850 ms", &[one("850ms")], &[]), 3);
        assert_eq!(score("disk at 93 percent", &[one("93%")], &[]), 3);
        assert_eq!(score("disk at 93 %", &[one("93%")], &[]), 3);
        assert_eq!(score("12 GB free", &[one("12GB")], &[]), 3);
        // A word after a number is not a unit.
        assert_eq!(normalise("3 builds"), "3 builds");
    }

    #[test]
    fn variants_and_case_and_dashes() {
        let k = Keyword::Variants(vec!["us-east-1".into(), "us east 1".into()]);
        assert_eq!(score("US–EAST–1 failed", std::slice::from_ref(&k), &[]), 3);
        assert_eq!(score("region us east 1", std::slice::from_ref(&k), &[]), 3);
        assert_eq!(score("region eu-west-1", &[k], &[]), 0);
    }

    #[test]
    fn the_rule_is_paper_compatible() {
        let req = vec![Keyword::Variants(vec!["4817".into(), "4,817".into()]), one("timeout")];
        let part = vec![one("build"), one("rollback")];
        assert_eq!(score("build 4,817 hit a TIMEOUT", &req, &part), 3);
        assert_eq!(score("build 4817", &req, &part), 2);
        assert_eq!(score("4817 and a rollback and a build", &req, &part), 2);
        assert_eq!(score("the build", &req, &part), 1);
        assert_eq!(score("nothing", &req, &part), 0);
        assert_eq!(score("", &req, &part), 0);
        assert_eq!(score("anything", &[], &[]), 0);
    }
}
