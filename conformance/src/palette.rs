//! Colour for the human summaries (`uopkit check`'s and `uopkit fuzz`'s text): failing
//! verdicts (`FAIL`, `XPASS`, `BAD`) red, passing ones green, expected failures and skips
//! yellow, headings bold — as ANSI escape sequences ([`anstyle`]).
//!
//! Whether a stream gets colour is the caller's decision (the CLI asks `anstream`: a terminal,
//! `NO_COLOR`, `CLICOLOR_FORCE`, `--color`); [`Palette::PLAIN`] paints nothing, so the plain
//! text is byte for byte what the summaries always were.

use anstyle::{AnsiColor, Style};

use crate::harness::Tally;

/// How text is painted: in colour, or not at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Palette {
    on: bool,
}

const RED: Style = Style::new()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Red)))
    .bold();
const GREEN: Style = Style::new().fg_color(Some(anstyle::Color::Ansi(AnsiColor::Green)));
const YELLOW: Style = Style::new().fg_color(Some(anstyle::Color::Ansi(AnsiColor::Yellow)));
const CYAN: Style = Style::new().fg_color(Some(anstyle::Color::Ansi(AnsiColor::Cyan)));
const BOLD: Style = Style::new().bold();

impl Palette {
    /// No colour: the text unchanged.
    pub const PLAIN: Palette = Palette { on: false };
    /// ANSI colour.
    pub const ANSI: Palette = Palette { on: true };

    pub fn new(colour: bool) -> Palette {
        Palette { on: colour }
    }

    fn paint(&self, style: Style, text: &str) -> String {
        if self.on {
            format!("{style}{text}{style:#}")
        } else {
            text.to_string()
        }
    }

    /// A verdict label (`ok`, `allowed`, `FAIL`, `skip`, `xfail`, `XPASS`, `BAD`) in its colour.
    pub fn label(&self, label: &str) -> String {
        let style = match label {
            "FAIL" | "XPASS" | "BAD" => RED,
            "ok" | "pass" => GREEN,
            "xfail" | "skip" => YELLOW,
            "allowed" => CYAN,
            _ => Style::new(),
        };
        self.paint(style, label)
    }

    /// A heading, bold.
    pub fn heading(&self, text: &str) -> String {
        self.paint(BOLD, text)
    }

    /// `n word`, in `style` when `n` is not zero.
    fn count(&self, n: usize, word: &str, style: Style) -> String {
        let text = format!("{n} {word}");
        if n == 0 {
            text
        } else {
            self.paint(style, &text)
        }
    }

    /// [`Tally::line`], with the counts that are not zero in their verdict's colour.
    pub fn tally_line(&self, t: &Tally) -> String {
        let mut passed = self.count(t.passed, "passed", GREEN);
        if t.allowed > 0 {
            passed += &format!(" ({})", self.count(t.allowed, "allowed", CYAN));
        }
        let mut s = [
            passed,
            self.count(t.failed, "failed", RED),
            self.count(t.xfail, "xfail", YELLOW),
            self.count(t.xpass, "xpass", RED),
            self.count(t.skipped, "skipped", YELLOW),
        ]
        .join(", ");
        if t.invalid > 0 {
            s += ", ";
            s += &self.count(t.invalid, "invalid", RED);
        }
        s
    }

    /// The text of a fuzz report (`FuzzReport`'s `Display`), painted: its first line bold,
    /// `FAIL` red, `refused` yellow.
    pub fn fuzz_summary(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        for (i, line) in text.split_inclusive('\n').enumerate() {
            let (body, end) = match line.strip_suffix('\n') {
                Some(b) => (b, "\n"),
                None => (line, ""),
            };
            if i == 0 && !body.is_empty() {
                out += &self.heading(body);
            } else if let Some(rest) = body.strip_prefix("FAIL ") {
                out += &self.label("FAIL");
                out.push(' ');
                out += rest;
            } else if let Some(rest) = body.strip_prefix("refused ") {
                out += &self.paint(YELLOW, "refused");
                out.push(' ');
                out += rest;
            } else {
                out += body;
            }
            out += end;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally() -> Tally {
        Tally {
            passed: 12,
            failed: 0,
            xfail: 1,
            xpass: 2,
            skipped: 3,
            invalid: 4,
            ..Tally::default()
        }
    }

    #[test]
    fn plain_is_the_text_unchanged() {
        let mut allowed = tally();
        allowed.allowed = 2;
        assert!(allowed
            .line()
            .starts_with("12 passed (2 allowed), 0 failed"));
        let p = Palette::PLAIN;
        assert_eq!(p.tally_line(&tally()), tally().line());
        assert_eq!(p.tally_line(&Tally::default()), Tally::default().line());
        assert_eq!(p.label("FAIL"), "FAIL");
        assert_eq!(p.heading("x"), "x");
        let fuzz =
            "fuzz cpu seed 0: 3 cases\nrefused 2×: why\nFAIL case #3 (Mismatch): …\n  first\n";
        assert_eq!(p.fuzz_summary(fuzz), fuzz);
    }

    #[test]
    fn colour_paints_verdicts_and_strips_back_to_the_plain_text() {
        let c = Palette::ANSI;
        assert_eq!(c.label("FAIL"), "\x1b[1m\x1b[31mFAIL\x1b[0m");
        assert_eq!(c.label("ok"), "\x1b[32mok\x1b[0m");
        assert_eq!(c.label("skip"), "\x1b[33mskip\x1b[0m");
        let line = c.tally_line(&tally());
        assert!(line.contains("\x1b[32m12 passed\x1b[0m"), "{line:?}");
        assert!(
            line.contains(", 0 failed, "),
            "zero counts stay plain: {line:?}"
        );
        assert!(line.contains("\x1b[1m\x1b[31m4 invalid\x1b[0m"), "{line:?}");
        let fuzz =
            "fuzz cpu seed 0: 3 cases\nrefused 2×: why\nFAIL case #3 (Mismatch): …\n  first\n";
        let painted = c.fuzz_summary(fuzz);
        assert!(painted.starts_with("\x1b[1mfuzz cpu"), "{painted:?}");
        assert!(
            painted.contains("\x1b[31mFAIL\x1b[0m case #3"),
            "{painted:?}"
        );
        assert!(painted.ends_with("  first\n"), "{painted:?}");
    }
}
