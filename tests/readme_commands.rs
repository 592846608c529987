//! Every command README.md shows in a `sh` block runs, as written, and does what the README
//! says: `cargo run --release --` stands for the `uopkit` binary cargo built for this test,
//! and each command runs under `bash` in a scratch copy of `corpus/`, `manifests/` and
//! `examples/` (so the files the commands write — pictures, reports, fuzz findings,
//! reformatted cases — land there). A command exits 0 unless its comment says `# exits N`;
//! the files it names after `-o`, `--output`, `--markdown` and `--html` must exist, non-empty;
//! `fmt` over the corpus must leave every case byte-identical.
//!
//! Not run, each with its reason (and any other shape of command fails this test, so a new
//! README command is either run here or given a reason): set-up commands (pip, apt-get,
//! export: `.ci/run` does them), `cargo build` (cargo built the binary for this test), and
//! `cargo test`/`cargo bench` (the test suite itself; `.ci/run` runs them).

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The command lines of README.md's `sh` blocks (comment-only lines dropped), with the
/// README's line number; and, for a `text` block that follows an `sh` block with only blank
/// lines between, the sample output of that block's last command (its line number → lines).
/// README lines: (line number, command), and (line number of a command, its sample output).
type Commands = (Vec<(usize, String)>, Vec<(usize, Vec<String>)>);

fn readme_commands() -> Commands {
    let text = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let (mut out, mut samples) = (vec![], vec![]);
    // The fenced block we are in (its language), whether the last block closed was `sh` with
    // only blank lines since, and the sample being collected.
    let mut block: Option<String> = None;
    let mut after_sh = false;
    let mut sample: Option<Vec<String>> = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if let Some(lang) = t.strip_prefix("```") {
            match block.take() {
                None => {
                    if lang == "text" && after_sh {
                        sample = Some(vec![]);
                    }
                    after_sh = false;
                    block = Some(lang.to_string());
                }
                Some(closed) => {
                    after_sh = closed == "sh";
                    if let (Some(lines), Some((n, _))) = (sample.take(), out.last()) {
                        samples.push((*n, lines));
                    }
                }
            }
            continue;
        }
        match (block.as_deref(), sample.as_mut()) {
            (Some("sh"), _) if !t.is_empty() && !t.starts_with('#') => {
                out.push((i + 1, t.to_string()))
            }
            (Some("text"), Some(lines)) => lines.push(t.to_string()),
            (None, _) if !t.is_empty() => after_sh = false,
            _ => {}
        }
    }
    (out, samples)
}

/// Why a command is not run here, or None to run it.
fn not_run(cmd: &str) -> Option<&'static str> {
    let words: Vec<&str> = cmd.split_whitespace().collect();
    let first = words.first().copied().unwrap_or("");
    if first.ends_with("/pip") || first == "export" || first == "sudo" {
        return Some("set-up (.ci/run does it)");
    }
    if words.starts_with(&["cargo", "build"]) {
        return Some("cargo built the binary this test runs");
    }
    if words.starts_with(&["git", "worktree"])
        || first == "scripts/mutants.sh"
        || words.starts_with(&["python3", "scripts/mutants_score.py"])
    {
        return Some(
            "a mutation run: needs cargo-mutants and about 15 minutes a shard (mutants/SAMPLES.md)",
        );
    }
    let runs_cargo = |sub: &str| words.windows(2).any(|w| w[0] == "cargo" && (w[1] == sub));
    if runs_cargo("test") || runs_cargo("bench") || runs_cargo("nextest") {
        return Some("the test suite itself (.ci/run runs it)");
    }
    None
}

/// The exit status a command's comment promises (`# exits 1`), else 0.
fn expected_status(cmd: &str) -> i32 {
    cmd.split_once('#')
        .and_then(|(_, c)| c.trim().strip_prefix("exits "))
        .and_then(|n| n.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The files a command says it writes.
fn written_files(cmd: &str) -> Vec<String> {
    let code = cmd.split_once('#').map_or(cmd, |(c, _)| c);
    let words: Vec<&str> = code.split_whitespace().collect();
    words
        .windows(2)
        .filter(|w| matches!(w[0], "-o" | "--output" | "--markdown" | "--html"))
        .map(|w| w[1].to_string())
        .collect()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read dir").flatten() {
        let p = e.path();
        let name = e.file_name();
        if name == "__pycache__" {
            continue;
        }
        if p.is_dir() {
            copy_dir(&p, &to.join(&name));
        } else {
            std::fs::copy(&p, to.join(&name)).expect("copy");
        }
    }
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, out);
        } else if p.extension().is_some_and(|x| x == "json") {
            out.push(p);
        }
    }
}

/// A `python3` with numpy, for the commands that use the numpy example backend: the one CI
/// names (`UOPKIT_TEST_PYTHON`), else the PATH's if it has numpy.
fn numpy_python_dir() -> Result<Option<PathBuf>, String> {
    if let Ok(p) = std::env::var("UOPKIT_TEST_PYTHON") {
        return Ok(Path::new(&p).parent().map(Path::to_path_buf));
    }
    let has = Command::new("python3")
        .args(["-c", "import numpy"])
        .status()
        .is_ok_and(|s| s.success());
    if has {
        Ok(None)
    } else {
        Err("numpy is not importable by python3 (UOPKIT_TEST_PYTHON names one that is)".into())
    }
}

#[test]
fn every_readme_command_runs_as_documented() {
    let bin = env!("CARGO_BIN_EXE_uopkit");
    let scratch = tempfile::tempdir().expect("temp dir");
    let root = scratch.path();
    for d in ["corpus", "manifests", "examples"] {
        copy_dir(&repo().join(d), &root.join(d));
    }
    let mut before = vec![];
    files_under(&repo().join("corpus"), &mut before);

    let (commands, samples) = readme_commands();
    let mut ran = 0;
    let mut failures = vec![];
    let mut skipped = vec![];
    for (line, cmd) in &commands {
        if let Some(why) = not_run(cmd) {
            skipped.push(format!("README.md:{line}: {cmd}\n    not run: {why}"));
            continue;
        }
        let code = cmd
            .split_once("  #")
            .map_or(cmd.as_str(), |(c, _)| c)
            .trim();
        let shell = if let Some(rest) = code.strip_prefix("cargo run --release -- ") {
            format!("'{bin}' {rest}")
        } else if code.starts_with("python3 ") {
            code.to_string()
        } else {
            failures.push(format!(
                "README.md:{line}: `{cmd}`: a command this test does not know how to run; \
                 run it here or give not_run() a reason"
            ));
            continue;
        };
        let mut path = std::env::var_os("PATH").unwrap_or_default();
        if cmd.contains("numpy_graph.py") {
            match numpy_python_dir() {
                Ok(Some(dir)) => {
                    let mut p = std::ffi::OsString::from(dir);
                    p.push(":");
                    p.push(&path);
                    path = p;
                }
                Ok(None) => {}
                Err(why) if std::env::var_os("UOPKIT_REQUIRE_NUMPY").is_none() => {
                    skipped.push(format!("README.md:{line}: {cmd}\n    not run: {why}"));
                    continue;
                }
                Err(why) => {
                    failures.push(format!("README.md:{line}: `{cmd}`: {why}"));
                    continue;
                }
            }
        }
        let started = std::time::Instant::now();
        let out = Command::new("bash")
            .args(["-O", "globstar", "-c", &format!("timeout 900 {shell}")])
            .current_dir(root)
            .env("PATH", path)
            .env_remove("NO_COLOR")
            .output()
            .expect("bash");
        ran += 1;
        let status = out.status.code().unwrap_or(-1);
        let want = expected_status(cmd);
        eprintln!(
            "README.md:{line}: exit {status} in {:.1}s: {code}",
            started.elapsed().as_secs_f64()
        );
        if status != want {
            failures.push(format!(
                "README.md:{line}: `{code}` exited {status}, the README says {want}\n--- stdout (tail)\n{}\n--- stderr (tail)\n{}",
                tail(&out.stdout),
                tail(&out.stderr)
            ));
            continue;
        }
        if out.stdout.is_empty() && out.stderr.is_empty() && written_files(cmd).is_empty() {
            failures.push(format!(
                "README.md:{line}: `{code}` printed nothing and wrote nothing"
            ));
        }
        // A sample output shown after the command: each line of it (but `…`) is a line of
        // what the command prints.
        let printed = String::from_utf8_lossy(&out.stdout).to_string();
        let printed: Vec<&str> = printed.lines().map(str::trim).collect();
        for (_, lines) in samples.iter().filter(|(n, _)| n == line) {
            for l in lines.iter().filter(|l| !l.is_empty() && l.as_str() != "…") {
                if !printed.contains(&l.as_str()) {
                    failures.push(format!(
                        "README.md:{line}: the sample output shows\n    {l}\nwhich `{code}` does not print"
                    ));
                }
            }
        }
        for f in written_files(cmd) {
            let p = root.join(&f);
            let size = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
            if size == 0 {
                failures.push(format!("README.md:{line}: `{code}` did not write {f}"));
            }
        }
    }
    // `fmt` over the corpus (and everything else) left the shipped cases as they are.
    for p in &before {
        let rel = p.strip_prefix(repo()).expect("under the repo");
        let copy = root.join(rel);
        if std::fs::read(p).ok() != std::fs::read(&copy).ok() {
            failures.push(format!(
                "{} changed (or vanished) after the README's commands",
                rel.display()
            ));
        }
    }
    for s in &skipped {
        eprintln!("{s}");
    }
    assert!(
        ran >= 20,
        "only {ran} README commands ran: the README lost its examples, or this test its parser"
    );
    assert!(
        failures.is_empty(),
        "{} of {} README commands did not do what the README says:\n\n{}",
        failures.len(),
        commands.len(),
        failures.join("\n\n")
    );
}

fn tail(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

#[test]
fn the_command_parser_reads_exit_codes_files_and_reasons() {
    assert_eq!(expected_status("uopkit check x   # exits 1"), 1);
    assert_eq!(expected_status("uopkit check x   # every case"), 0);
    assert_eq!(
        written_files("uopkit dot a.json --format svg -o s.svg   # pictures -o x"),
        vec!["s.svg"]
    );
    assert!(not_run("cargo test --test conformance").is_some());
    assert!(not_run("UOPKIT_BACKENDS=oracle cargo test --test conformance").is_some());
    assert!(not_run("cargo run --release -- check").is_none());
    assert!(not_run("python3 corpus/gen/validate.py").is_none());
    let (commands, samples) = readme_commands();
    assert!(commands.len() >= 20);
    assert!(
        samples.iter().any(|(n, lines)| commands
            .iter()
            .any(|(m, c)| m == n && c.contains("--wrong"))
            && lines.iter().any(|l| l.starts_with("FAIL"))),
        "the 'read a failure' sample is attached to its command: {samples:?}"
    );
}
