//! Text for people at a terminal. A tool result, the model's text, a stored
//! session or a server's message is untrusted: written raw, its escape
//! sequences would set the terminal's title, clear the screen, rewrite what
//! was printed above (`\r`, cursor moves), ring the bell or, on some
//! terminals, do worse. Every human-facing line of `mf` passes through
//! [`printable`]; JSON output needs nothing (serde escapes every control).

use std::borrow::Cow;

/// `s` without terminal controls: `\n` and `\t` stay; every other C0 control
/// (BEL, `\r`, backspace, ESC …), DEL and every C1 control go. Escape
/// sequences go whole (CSI `ESC [ … final`, OSC / DCS / SOS / PM / APC
/// strings up to their BEL or ST, two-character escapes such as `ESC c`), so
/// no `]0;title` is left behind. A string sequence that is never terminated
/// loses only its introducer: the text after it is shown, not swallowed.
///
/// Text printed in pieces (streamed tokens) may split a sequence between two
/// pieces; each piece loses its own controls, so what remains of a split
/// sequence is plain text and can no longer reach the terminal as a command.
#[must_use]
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_control) {
        return Cow::Borrowed(s);
    }
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if !is_control(c) {
            out.push(c);
            i += 1;
            continue;
        }
        i += match (c, chars.get(i + 1).copied()) {
            ('\u{1b}', Some('[')) => 2 + csi_len(&chars[i + 2..]),
            ('\u{1b}', Some(']' | 'P' | 'X' | '^' | '_')) => 2 + string_len(&chars[i + 2..]),
            ('\u{1b}', Some(n)) if (' '..='/').contains(&n) => {
                // Intermediates, then one final character (`ESC ( B`, `ESC # 8`).
                let k = chars[i + 1..].iter().take_while(|c| (' '..='/').contains(*c)).count();
                1 + k + usize::from(chars.get(i + 1 + k).is_some_and(|c| ('0'..='~').contains(c)))
            }
            ('\u{1b}', Some(n)) if ('0'..='~').contains(&n) => 2,
            ('\u{9b}', _) => 1 + csi_len(&chars[i + 1..]),
            ('\u{90}' | '\u{98}' | '\u{9d}' | '\u{9e}' | '\u{9f}', _) => 1 + string_len(&chars[i + 1..]),
            _ => 1,
        };
    }
    Cow::Owned(out)
}

/// Whether `c` is a control the terminal may act on: C0, DEL and C1 (the
/// Unicode category Cc), all but `\n` and `\t`.
fn is_control(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

/// The length of a CSI sequence's parameters, intermediates and final
/// character after its introducer (up to the first character that cannot be
/// part of it, which is then printed or stripped on its own).
fn csi_len(rest: &[char]) -> usize {
    let body = rest.iter().take_while(|c| (' '..='?').contains(*c)).count();
    body + usize::from(rest.get(body).is_some_and(|c| ('@'..='~').contains(c)))
}

/// The length of a control string's body and terminator (BEL, `ESC \` or
/// ST) after its introducer; 0 when it is never terminated.
fn string_len(rest: &[char]) -> usize {
    for (k, c) in rest.iter().enumerate() {
        match c {
            '\u{7}' | '\u{9c}' => return k + 1,
            '\u{1b}' if rest.get(k + 1) == Some(&'\\') => return k + 2,
            _ => {}
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_newlines_and_tabs_pass_untouched() {
        for s in ["", "disk sdb is 97% full", "a\nb\tc", "ünïcode → ✓ 漢字 🙂", "[not] an escape ]0; either"] {
            assert!(matches!(printable(s), Cow::Borrowed(_)), "{s:?}");
            assert_eq!(printable(s), s);
        }
    }

    #[test]
    fn escape_sequences_go_whole() {
        let cases = [
            ("title\u{1b}]0;pwned\u{7}done", "titledone"),                             // OSC ended by BEL
            ("a\u{1b}]8;;http://127.0.0.1/\u{1b}\\link\u{1b}]8;;\u{1b}\\b", "alinkb"), // OSC 8 hyperlinks, ended by ST
            ("\u{1b}[2J\u{1b}[Hclear", "clear"),                                       // clear screen, cursor home
            ("red \u{1b}[1;31mbold\u{1b}[0m end", "red bold end"),                     // SGR
            ("\u{1b}[?1049hscreen", "screen"),                                         // private mode
            ("\u{9b}31mC1 CSI", "C1 CSI"),                                             // the one-character CSI
            ("\u{9d}0;t\u{9c}C1 OSC", "C1 OSC"),                                       // C1 OSC ended by C1 ST
            ("\u{1b}Pq#0;2;0;0;0\u{1b}\\sixel", "sixel"),                              // DCS
            ("\u{1b}_apc\u{7}\u{1b}^pm\u{7}\u{1b}Xsos\u{7}x", "x"),                    // APC, PM, SOS
            ("\u{1b}creset \u{1b}(Bcharset \u{1b}7saved", "reset charset saved"),
            ("bell\u{7}\u{7}", "bell"),
            ("over\rwrite\u{8}\u{7f}", "overwrite"),
            ("nul\u{0}\u{1f}\u{85}\u{9c}", "nul"),
            ("keep\n\tthese", "keep\n\tthese"),
        ];
        for (raw, want) in cases {
            assert_eq!(printable(raw), want, "{raw:?}");
        }
    }

    /// An unterminated string loses its introducer, not the text after it;
    /// a sequence cut at the end of the text goes with whatever it had.
    #[test]
    fn unterminated_and_cut_sequences_leave_no_control() {
        assert_eq!(printable("\u{1b}]0;never ended, still shown"), "0;never ended, still shown");
        for raw in ["end\u{1b}", "end\u{1b}[", "end\u{1b}[1;3", "end\u{9b}", "end\u{1b}(", "end\u{1b}]", "end\u{1b}\u{1b}"] {
            assert_eq!(printable(raw), "end", "{raw:?}");
        }
    }

    /// Every string of up to four characters over controls, sequence
    /// introducers and plain text: nothing but `\n` and `\t` of the controls
    /// comes out, and cleaning twice changes nothing.
    #[test]
    fn nothing_but_newline_and_tab_survives() {
        let alphabet = ['\u{1b}', '\u{9b}', '\u{9d}', '\u{9c}', '\u{7}', '\r', '\n', '\t', '\u{7f}', '[', ']', '\\', '0', ';', 'm', 'a'];
        let mut s = String::new();
        let mut count = 0;
        for n in 0..=4u32 {
            for mut k in 0..alphabet.len().pow(n) {
                s.clear();
                for _ in 0..n {
                    s.push(alphabet[k % alphabet.len()]);
                    k /= alphabet.len();
                }
                let out = printable(&s);
                assert!(out.chars().all(|c| !is_control(c)), "{s:?} -> {out:?}");
                assert_eq!(printable(&out), out, "{s:?}");
                count += 1;
            }
        }
        assert_eq!(count, 1 + 16 + 16 * 16 + 16 * 16 * 16 + 16 * 16 * 16 * 16);
    }
}
