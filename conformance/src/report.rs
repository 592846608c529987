//! Reports of `uopkit check` and `uopkit fuzz` for people and for tools: the human text
//! (what the commands always printed), a JSON document (`uopkit-report/1`, schema:
//! [`json_schema`], `uopkit schema --report`) and JUnit XML (for CI systems).
//!
//! [`emit`] sends a report where it was asked to go: the document to `--output FILE`
//! (written atomically) or to stdout; when a JSON or JUnit document goes to stdout, the
//! human summary goes to stderr so that stdout is only the document.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::fuzz::FuzzReport;
use crate::harness::{self, FailKind, Suite, Tally, TrialResult, Verdict};
use crate::palette::Palette;

/// The `format` field of every report document.
pub const REPORT_FORMAT: &str = "uopkit-report/1";

/// How a report is written (`--format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// The human summary (the default; what the commands always printed).
    #[default]
    Text,
    /// One JSON object ([`Report`]).
    Json,
    /// JUnit XML.
    Junit,
    /// One self-contained HTML page with pictures of the failures (`check` only;
    /// [`crate::report_html`]).
    Html,
}

/// `--format` named something other than text, json or junit.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown report format '{0}' (expected text, json, junit or html)")]
pub struct UnknownFormat(pub String);

impl std::str::FromStr for Format {
    type Err = UnknownFormat;
    fn from_str(s: &str) -> Result<Format, UnknownFormat> {
        match s {
            "text" => Ok(Format::Text),
            "json" => Ok(Format::Json),
            "junit" => Ok(Format::Junit),
            "html" => Ok(Format::Html),
            other => Err(UnknownFormat(other.to_string())),
        }
    }
}

/// A report could not be delivered.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("cannot write the report to {}: {source}", path.display())]
    Output {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write the report: {0}")]
    Stdout(std::io::Error),
    #[error("cannot encode the report as JSON: {0}")]
    Encode(#[from] serde_json::Error),
    #[error("--format html is for `uopkit check`; `uopkit fuzz` writes text, json or junit")]
    HtmlForFuzz,
}

/// A report document: what `--format json` writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "command", rename_all = "lowercase")]
pub enum Report {
    /// `uopkit check`.
    Check(CheckReport),
    /// `uopkit fuzz`.
    Fuzz(FuzzDoc),
}

/// The report of `uopkit check`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CheckReport {
    /// Always `uopkit-report/1`.
    pub format: String,
    /// The corpus directory, as given.
    pub corpus: String,
    /// The backends, in the order they ran.
    pub backends: Vec<String>,
    /// Cases selected.
    pub cases: usize,
    /// Cases that cannot be read or are invalid (each counted once).
    pub invalid_cases: usize,
    /// Every trial, in case order then backend order (the order `uopkit check` lists them).
    pub trials: Vec<Trial>,
    /// Per-backend counts, in backend order.
    pub tallies: Vec<BackendTally>,
}

/// One trial (case × backend).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Trial {
    /// `backend::case`, as `uopkit check` names it.
    pub name: String,
    pub case: String,
    pub backend: String,
    pub verdict: Label,
    /// How it failed (only for `FAIL`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<Kind>,
    /// The failure report, the skip or xfail reason, what allowed an `allowed` trial, or why
    /// the case is invalid (absent for `ok`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// For `xfail`: the failure the manifest expected and got.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Seconds the trial took, where the harness measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
}

/// A trial's verdict label (`Verdict::label`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Label {
    #[serde(rename = "ok")]
    Ok,
    /// Passed within an allowance (the detail says which, and how many elements).
    #[serde(rename = "allowed")]
    Allowed,
    #[serde(rename = "FAIL")]
    Fail,
    #[serde(rename = "skip")]
    Skip,
    #[serde(rename = "xfail")]
    Xfail,
    #[serde(rename = "XPASS")]
    Xpass,
    #[serde(rename = "BAD")]
    Bad,
}

impl Label {
    pub fn of(v: &Verdict) -> Label {
        match v {
            Verdict::Pass => Label::Ok,
            Verdict::Allowed(_) => Label::Allowed,
            Verdict::Fail { .. } => Label::Fail,
            Verdict::Skip(_) => Label::Skip,
            Verdict::XFail { .. } => Label::Xfail,
            Verdict::XPass(_) => Label::Xpass,
            Verdict::Invalid(_) => Label::Bad,
        }
    }
}

/// How a failure came about (`harness::FailKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Mismatch,
    Refused,
    Backend,
    Crash,
    Oracle,
    Expectation,
}

impl From<FailKind> for Kind {
    fn from(k: FailKind) -> Kind {
        match k {
            FailKind::Mismatch => Kind::Mismatch,
            FailKind::Refused => Kind::Refused,
            FailKind::Backend => Kind::Backend,
            FailKind::Crash => Kind::Crash,
            FailKind::Oracle => Kind::Oracle,
            FailKind::Expectation => Kind::Expectation,
        }
    }
}

/// One backend's counts (`harness::Tally`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BackendTally {
    pub backend: String,
    /// Passed trials, the allowed ones included.
    pub passed: usize,
    /// Passed trials whose values differ from the oracle's within an allowance.
    #[serde(default)]
    pub allowed: usize,
    pub failed: usize,
    pub xfail: usize,
    pub xpass: usize,
    pub skipped: usize,
    pub invalid: usize,
    /// Skip reasons with how many trials each skipped.
    pub skip_reasons: BTreeMap<String, usize>,
}

/// The report of `uopkit fuzz`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FuzzDoc {
    /// Always `uopkit-report/1`.
    pub format: String,
    pub backend: String,
    pub seed: u64,
    /// Cases generated.
    pub cases: u64,
    pub passed: u64,
    pub skipped: u64,
    /// Cases the scheduler refused (not counted as failures).
    pub refused: u64,
    /// The refusal reasons with their counts.
    pub refusals: BTreeMap<String, u64>,
    /// Seconds the run took.
    pub seconds: f64,
    /// Every failure found, in the order found.
    pub findings: Vec<Finding>,
}

/// One failure the fuzzer found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Finding {
    /// The generated case's number (1 = the first case of the run).
    pub case_number: u64,
    /// The run's seed (with the case number it regenerates the case).
    pub seed: u64,
    pub kind: Kind,
    /// The backend's report on the original case.
    pub message: String,
    /// The report on the shrunk case.
    pub shrunk_message: String,
    /// The shrunk case file written.
    pub file: String,
    pub nodes_before: usize,
    pub nodes_after: usize,
    /// The stage that first diverges from the oracle, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// The original program, step by step.
    pub program: Vec<String>,
}

/// The JSON Schema of report documents (what `uopkit schema --report` prints).
pub fn json_schema() -> Json {
    let mut schema = serde_json::to_value(schemars::schema_for!(Report)).unwrap_or(Json::Null);
    if let Some(o) = schema.as_object_mut() {
        o.insert(
            "$schema".into(),
            "https://json-schema.org/draft/2020-12/schema".into(),
        );
        o.insert("title".into(), REPORT_FORMAT.into());
        o.insert(
            "description".into(),
            "A report of `uopkit check` or `uopkit fuzz` (`--format json`).".into(),
        );
    }
    schema
}

/// The JSON document of a `check` run.
pub fn check_report(suite: &Suite, results: &[TrialResult]) -> CheckReport {
    let trials = results
        .iter()
        .map(|r| {
            let (kind, failure) = match &r.verdict {
                Verdict::Fail { kind, .. } => (Some(Kind::from(*kind)), None),
                Verdict::XFail { failure, .. } => (None, Some(failure.clone())),
                _ => (None, None),
            };
            Trial {
                name: suite.trial_name(r.case, r.backend),
                case: suite.cases[r.case].name.clone(),
                backend: suite.backends[r.backend].backend.name().to_string(),
                verdict: Label::of(&r.verdict),
                kind,
                detail: r.verdict.detail().map(str::to_string),
                failure,
                seconds: None,
            }
        })
        .collect();
    let tallies = harness::tallies(suite, results)
        .into_iter()
        .zip(&suite.backends)
        .map(|(t, slot)| backend_tally(slot.backend.name(), t))
        .collect();
    CheckReport {
        format: REPORT_FORMAT.into(),
        corpus: suite.corpus.display().to_string(),
        backends: suite
            .backends
            .iter()
            .map(|s| s.backend.name().to_string())
            .collect(),
        cases: suite.cases.len(),
        invalid_cases: invalid_cases(results),
        trials,
        tallies,
    }
}

fn backend_tally(backend: &str, t: Tally) -> BackendTally {
    BackendTally {
        backend: backend.to_string(),
        passed: t.passed,
        allowed: t.allowed,
        failed: t.failed,
        xfail: t.xfail,
        xpass: t.xpass,
        skipped: t.skipped,
        invalid: t.invalid,
        skip_reasons: t.skip_reasons,
    }
}

/// Unreadable cases are invalid on every backend; each case counts once.
fn invalid_cases(results: &[TrialResult]) -> usize {
    results
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Invalid(_)))
        .map(|r| r.case)
        .collect::<BTreeSet<_>>()
        .len()
}

/// `uopkit check`'s exit status: 2 when a case is unreadable or invalid, 1 when a trial
/// fails, else 0.
pub fn check_exit_code(results: &[TrialResult]) -> u8 {
    if invalid_cases(results) > 0 {
        2
    } else if results.iter().any(|r| r.verdict.is_failure()) {
        1
    } else {
        0
    }
}

/// The human summary of a `check` run (what `uopkit check` prints; `verbose` also lists
/// every skipped and expected-failure trial).
pub fn check_text(suite: &Suite, results: &[TrialResult], verbose: bool) -> String {
    check_text_painted(suite, results, verbose, Palette::PLAIN)
}

/// [`check_text`] painted with `palette` (verdict labels and counts in colour, the last
/// line bold); [`Palette::PLAIN`] gives exactly [`check_text`].
pub fn check_text_painted(
    suite: &Suite,
    results: &[TrialResult],
    verbose: bool,
    palette: Palette,
) -> String {
    let mut s = String::new();
    for r in results {
        let show = r.verdict.is_failure() || (verbose && !matches!(r.verdict, Verdict::Pass));
        if show {
            let detail = r.verdict.detail().unwrap_or("");
            let label = r.verdict.label();
            let _ = writeln!(
                s,
                "{}{:pad$} {}: {}",
                palette.label(label),
                "",
                suite.trial_name(r.case, r.backend),
                detail.trim_end().replace('\n', "\n      "),
                pad = 5usize.saturating_sub(label.chars().count())
            );
        }
    }
    let tallies = harness::tallies(suite, results);
    for (slot, t) in suite.backends.iter().zip(&tallies) {
        let _ = writeln!(
            s,
            "{}: {}",
            palette.heading(slot.backend.name()),
            palette.tally_line(t)
        );
        for (why, n) in &t.skip_reasons {
            let _ = writeln!(s, "  skipped {n}: {why}");
        }
    }
    let last = format!(
        "{} case(s) selected in {}, {} unreadable or invalid",
        suite.cases.len(),
        suite.corpus.display(),
        invalid_cases(results)
    );
    let _ = writeln!(s, "{}", palette.heading(&last));
    s
}

/// The JUnit XML of a `check` run: one `<testsuite>` per backend, one `<testcase>` per trial.
pub fn check_junit(suite: &Suite, results: &[TrialResult]) -> String {
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let fails = results.iter().filter(|r| r.verdict.is_failure()).count();
    let skips = results
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Skip(_) | Verdict::XFail { .. }))
        .count();
    let _ = writeln!(
        x,
        "<testsuites name=\"uopkit check\" tests=\"{}\" failures=\"{fails}\" errors=\"0\" skipped=\"{skips}\">",
        results.len()
    );
    for (b, slot) in suite.backends.iter().enumerate() {
        let mine: Vec<&TrialResult> = results.iter().filter(|r| r.backend == b).collect();
        let fails = mine.iter().filter(|r| r.verdict.is_failure()).count();
        let skips = mine
            .iter()
            .filter(|r| matches!(r.verdict, Verdict::Skip(_) | Verdict::XFail { .. }))
            .count();
        let name = attr(slot.backend.name());
        let _ = writeln!(
            x,
            "  <testsuite name=\"{name}\" tests=\"{}\" failures=\"{fails}\" errors=\"0\" skipped=\"{skips}\">",
            mine.len()
        );
        for r in mine {
            let case = attr(&suite.cases[r.case].name);
            let open = format!("    <testcase classname=\"{name}\" name=\"{case}\"");
            match &r.verdict {
                Verdict::Pass => {
                    let _ = writeln!(x, "{open}/>");
                }
                Verdict::Allowed(by) => {
                    let _ = writeln!(x, "{open}>\n      <system-out>{}</system-out>", text(by));
                    let _ = writeln!(x, "    </testcase>");
                }
                Verdict::Skip(why) | Verdict::XFail { reason: why, .. } => {
                    let _ = writeln!(x, "{open}>\n      <skipped message=\"{}\"/>", attr(why));
                    let _ = writeln!(x, "    </testcase>");
                }
                v => {
                    let detail = v.detail().unwrap_or("");
                    let ty = match v {
                        Verdict::Fail { kind, .. } => {
                            format!("{:?}", Kind::from(*kind)).to_lowercase()
                        }
                        Verdict::XPass(_) => "xpass".into(),
                        _ => "invalid".into(),
                    };
                    let _ = writeln!(
                        x,
                        "{open}>\n      <failure type=\"{ty}\" message=\"{}\">{}</failure>",
                        attr(&match v {
                            Verdict::Fail { .. } => first_line(detail).to_string(),
                            _ => format!("{}: {}", v.label(), first_line(detail)),
                        }),
                        text(detail)
                    );
                    let _ = writeln!(x, "    </testcase>");
                }
            }
        }
        let _ = writeln!(x, "  </testsuite>");
    }
    x.push_str("</testsuites>\n");
    x
}

/// The JSON document of a `fuzz` run.
pub fn fuzz_report(r: &FuzzReport) -> FuzzDoc {
    FuzzDoc {
        format: REPORT_FORMAT.into(),
        backend: r.backend.clone(),
        seed: r.seed,
        cases: r.cases,
        passed: r.passed,
        skipped: r.skipped,
        refused: r.refusals.values().sum(),
        refusals: r.refusals.clone(),
        seconds: r.elapsed.as_secs_f64(),
        findings: r
            .failures
            .iter()
            .map(|f| Finding {
                case_number: f.case_number,
                seed: r.seed,
                kind: f.class.into(),
                message: f.message.clone(),
                shrunk_message: f.shrunk_message.clone(),
                file: f.path.display().to_string(),
                nodes_before: f.nodes_before,
                nodes_after: f.nodes_after,
                stage: f.stage.clone(),
                program: f.program.clone(),
            })
            .collect(),
    }
}

/// The JUnit XML of a `fuzz` run: one failing `<testcase>` per finding, or one passing
/// testcase when there were none.
pub fn fuzz_junit(r: &FuzzReport) -> String {
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let n = r.failures.len().max(1);
    let fails = r.failures.len();
    let suite = attr(&format!("fuzz {}", r.backend));
    let _ = writeln!(
        x,
        "<testsuites name=\"uopkit fuzz\" tests=\"{n}\" failures=\"{fails}\" errors=\"0\" skipped=\"0\">"
    );
    let _ = writeln!(
        x,
        "  <testsuite name=\"{suite}\" tests=\"{n}\" failures=\"{fails}\" errors=\"0\" skipped=\"0\" time=\"{:.3}\">",
        r.elapsed.as_secs_f64()
    );
    if r.failures.is_empty() {
        let _ = writeln!(
            x,
            "    <testcase classname=\"{suite}\" name=\"{}\"/>",
            attr(&format!("seed {}: {} cases, no failure", r.seed, r.cases))
        );
    }
    for f in &r.failures {
        let name = attr(&format!("seed {} case #{}", r.seed, f.case_number));
        let mut body = format!(
            "{:?} failure, shrunk from {} to {} nodes, written to {}\nfirst divergence: {}\n",
            f.class,
            f.nodes_before,
            f.nodes_after,
            f.path.display(),
            f.stage
                .as_deref()
                .unwrap_or("unknown (no kernel-level oracle yet)")
        );
        body += &f.shrunk_message;
        let ty = format!("{:?}", Kind::from(f.class)).to_lowercase();
        let _ = writeln!(
            x,
            "    <testcase classname=\"{suite}\" name=\"{name}\" file=\"{}\">\n      <failure type=\"{}\" message=\"{}\">{}</failure>\n    </testcase>",
            attr(&f.path.display().to_string()),
            ty,
            attr(first_line(&f.shrunk_message)),
            text(&body)
        );
    }
    x.push_str("  </testsuite>\n</testsuites>\n");
    x
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// Whether XML 1.0 allows `c` at all (`Char` production; Rust chars are never surrogates).
fn xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{FFFD}' | '\u{10000}'..='\u{10FFFF}')
}

/// `s` escaped for XML character data: `& < > " '` as entities, characters XML 1.0 forbids
/// (control characters other than tab, newline and CR; U+FFFE, U+FFFF) dropped.
pub fn text(s: &str) -> String {
    escape(s, false)
}

/// `s` escaped for an attribute value in double quotes: as [`text`], and tab, newline and
/// CR as character references (a parser would turn them into spaces).
pub fn attr(s: &str) -> String {
    escape(s, true)
}

fn escape(s: &str, attribute: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars().filter(|&c| xml_char(c)) {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' if attribute => out.push_str("&#9;"),
            '\n' if attribute => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            c => out.push(c),
        }
    }
    out
}

/// Where a report goes and how (`--format`, `--output`).
#[derive(Clone, Debug, Default)]
pub struct Emit {
    pub format: Format,
    /// `--output FILE`: the report (in `format`) goes there, written atomically; the human
    /// summary then still goes to stdout unless the format is text.
    pub output: Option<PathBuf>,
    /// `check -v`: the human summary also lists skipped and expected-failure trials.
    pub verbose: bool,
    /// Which streams the human summary may be painted on (files never are).
    pub colour: Colour,
}

/// Whether the human summary is painted on stdout and on stderr (the CLI decides from
/// the terminal, `NO_COLOR`, `CLICOLOR_FORCE` and `--color`). Default: neither.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Colour {
    pub stdout: bool,
    pub stderr: bool,
}

/// The human summary, plain and painted.
struct Human {
    plain: String,
    painted: String,
}

impl Human {
    fn on(&self, colour: bool) -> &str {
        if colour {
            &self.painted
        } else {
            &self.plain
        }
    }
}

/// Delivers a report: `human` is the text summary, `document` the report in `emit.format`
/// (for text, the summary itself).
fn deliver(emit: &Emit, human: &Human, document: &str) -> Result<(), ReportError> {
    let (out, err) = (human.on(emit.colour.stdout), human.on(emit.colour.stderr));
    match (&emit.output, emit.format) {
        (Some(path), format) => {
            write_file(path, document)?;
            if format != Format::Text {
                print_to(std::io::stdout().lock(), out)?;
            }
            Ok(())
        }
        (None, Format::Text) => print_to(std::io::stdout().lock(), out),
        (None, _) => {
            print_to(std::io::stderr().lock(), err)?;
            print_to(std::io::stdout().lock(), document)
        }
    }
}

fn write_file(path: &Path, document: &str) -> Result<(), ReportError> {
    crate::atomic::write_atomic(path, document.as_bytes()).map_err(|source| ReportError::Output {
        path: path.to_path_buf(),
        source,
    })
}

fn print_to(mut w: impl std::io::Write, s: &str) -> Result<(), ReportError> {
    w.write_all(s.as_bytes())
        .and_then(|()| w.flush())
        .map_err(ReportError::Stdout)
}

fn json_text(r: &Report) -> Result<String, ReportError> {
    Ok(serde_json::to_string_pretty(r)? + "\n")
}

/// Writes the report of a `check` run as `emit` asks.
pub fn emit_check(suite: &Suite, results: &[TrialResult], emit: &Emit) -> Result<(), ReportError> {
    let human = Human {
        plain: check_text(suite, results, emit.verbose),
        painted: check_text_painted(suite, results, emit.verbose, Palette::ANSI),
    };
    let document = match emit.format {
        Format::Text => human.plain.clone(),
        Format::Json => json_text(&Report::Check(check_report(suite, results)))?,
        Format::Junit => check_junit(suite, results),
        Format::Html => crate::report_html::check_html(
            suite,
            results,
            &crate::report_html::RunInfo::from_process(),
        ),
    };
    deliver(emit, &human, &document)
}

/// Writes the report of a `fuzz` run as `emit` asks.
pub fn emit_fuzz(report: &FuzzReport, emit: &Emit) -> Result<(), ReportError> {
    let plain = format!("{report}\n");
    let human = Human {
        painted: Palette::ANSI.fuzz_summary(&plain),
        plain,
    };
    let document = match emit.format {
        Format::Text => human.plain.clone(),
        Format::Json => json_text(&Report::Fuzz(fuzz_report(report)))?,
        Format::Junit => fuzz_junit(report),
        Format::Html => return Err(ReportError::HtmlForFuzz),
    };
    deliver(emit, &human, &document)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_drops_characters_xml_forbids() {
        assert_eq!(
            text("a<b & \"c\" 'd'>\u{1}\u{1b}[31m\tx\ny\u{FFFE}"),
            "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;[31m\tx\ny"
        );
        assert_eq!(attr("line1\nline2\tz\r"), "line1&#10;line2&#9;z&#13;");
        assert_eq!(text("ünïcode 😀"), "ünïcode 😀");
    }

    #[test]
    fn formats_parse_and_unknown_ones_are_errors() {
        assert_eq!("json".parse::<Format>(), Ok(Format::Json));
        assert_eq!("junit".parse::<Format>(), Ok(Format::Junit));
        assert_eq!("text".parse::<Format>(), Ok(Format::Text));
        assert_eq!("html".parse::<Format>(), Ok(Format::Html));
        assert!("yaml".parse::<Format>().is_err());
    }

    #[test]
    fn a_fuzz_finding_is_a_junit_failure_and_a_json_finding() {
        let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus/alu/add_float32.json");
        let case = crate::load::read_case(&corpus).expect("a corpus case");
        let report = FuzzReport {
            backend: "cpu".into(),
            seed: 9,
            cases: 4,
            passed: 3,
            skipped: 0,
            refusals: BTreeMap::new(),
            failures: vec![crate::fuzz::FuzzFailure {
                case_number: 4,
                class: FailKind::Mismatch,
                message: "output 'x' <differs> & more\nsecond line".into(),
                shrunk_message: "output 'x' differs\u{7}\nsecond".into(),
                program: vec!["a = add(b, c)".into()],
                nodes_before: 12,
                nodes_after: 3,
                shrink_checks: 40,
                case,
                path: PathBuf::from("regressions/fuzz_9_1.json"),
                stage: None,
            }],
            elapsed: std::time::Duration::from_millis(1500),
        };
        let x = fuzz_junit(&report);
        assert_eq!(x.matches("<testcase").count(), 1);
        assert_eq!(x.matches("<failure").count(), 1);
        assert!(x.contains("name=\"seed 9 case #4\""), "{x}");
        assert!(
            x.contains("message=\"output &apos;x&apos; differs\""),
            "{x}"
        );
        assert!(!x.contains('\u{7}'), "{x}");
        assert!(x.contains("regressions/fuzz_9_1.json"), "{x}");
        let doc = serde_json::to_value(Report::Fuzz(fuzz_report(&report))).expect("json");
        assert_eq!(doc["findings"][0]["file"], "regressions/fuzz_9_1.json");
        assert_eq!(doc["findings"][0]["seed"], 9);
        assert_eq!(doc["findings"][0]["kind"], "mismatch");
        assert_eq!(doc["seconds"], 1.5);
        assert!(doc["findings"][0].get("stage").is_none());
    }

    #[test]
    fn the_schema_names_the_format_and_both_commands() {
        let s = json_schema().to_string();
        assert!(s.contains(REPORT_FORMAT));
        assert!(s.contains("\"check\"") && s.contains("\"fuzz\""));
    }
}
