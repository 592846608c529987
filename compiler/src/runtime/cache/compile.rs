//! Running the compiler: with a timeout, its process group killed when it runs over; how
//! `UOPKIT_CC` and `UOPKIT_CC_TIMEOUT` are read; and what `-march=native` depends on.

use std::ffi::OsString;
use std::io::{Read, Write as _};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::{Duration, Instant};

use super::{CCompiler, SetupError};

/// Why running the compiler gave no output.
pub(super) enum RunFail {
    Spawn(std::io::Error),
    Timeout,
}

impl CCompiler {
    /// Runs the compiler (program, extra words, then `tail`) with `input` on stdin, killing
    /// it and its process group after the timeout.
    pub(super) fn run_tool(
        &self,
        tail: &[OsString],
        input: Option<Vec<u8>>,
    ) -> std::result::Result<Output, RunFail> {
        let mut cmd = Command::new(&self.cc);
        cmd.args(&self.args)
            .args(tail)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let deadline = Instant::now() + self.timeout;
        let mut child = cmd.spawn().map_err(RunFail::Spawn)?;
        // Feed stdin and drain stdout/stderr from other threads, so that neither a compiler
        // that writes a lot before reading its input nor one that never reads it can block
        // us. The threads end when the pipes close (at the latest when the group is killed).
        if let (Some(mut stdin), Some(input)) = (child.stdin.take(), input) {
            std::thread::spawn(move || {
                let _ = stdin.write_all(&input);
            });
        }
        let (tx, rx) = mpsc::channel::<(usize, Vec<u8>)>();
        let pipes: [Option<Box<dyn Read + Send>>; 2] = [
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ];
        let mut expected = 0;
        for (i, pipe) in pipes.into_iter().enumerate() {
            if let Some(mut pipe) = pipe {
                expected += 1;
                let tx = tx.clone();
                std::thread::spawn(move || {
                    let mut buf = Vec::new();
                    let _ = pipe.read_to_end(&mut buf);
                    let _ = tx.send((i, buf));
                });
            }
        }
        drop(tx);
        let mut nap = Duration::from_millis(1);
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) => {}
                Err(e) => {
                    kill_group(&mut child);
                    return Err(RunFail::Spawn(e));
                }
            }
            let now = Instant::now();
            if now >= deadline {
                kill_group(&mut child);
                return Err(RunFail::Timeout);
            }
            std::thread::sleep(nap.min(deadline - now));
            nap = (nap * 2).min(Duration::from_millis(20));
        };
        // The compiler has exited; something it started may still hold the pipes open.
        let mut out = [Vec::new(), Vec::new()];
        for _ in 0..expected {
            // (A moment's grace for a compile that finished just at the deadline.)
            let left = deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(200));
            match rx.recv_timeout(left) {
                Ok((i, buf)) => out[i] = buf,
                Err(_) => return Err(RunFail::Timeout),
            }
        }
        let [stdout, stderr] = out;
        Ok(Output {
            status,
            stdout,
            stderr,
        })
    }
}

/// Kills a child's process group (it leads one: `process_group(0)`) and reaps it.
fn kill_group(child: &mut Child) {
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: plain syscall. The child is not reaped yet, so its pid still names its
        // group (and nothing else).
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
    let _ = child.kill();
    let _ = child.wait();
}

pub(super) fn split_command(
    name: &str,
    line: &str,
) -> std::result::Result<(String, Vec<String>), SetupError> {
    let bad = |message: String| SetupError::BadSetting {
        name: name.into(),
        value: line.into(),
        message,
    };
    let mut words = shell_words::split(line)
        .map_err(|e| {
            bad(format!(
                "cannot be split into words like a shell would: {e}"
            ))
        })?
        .into_iter();
    match words.next() {
        None => Ok(("cc".into(), Vec::new())),
        Some(cc) if cc.is_empty() => Err(bad("the compiler's name is empty".into())),
        Some(cc) => Ok((cc, words.collect())),
    }
}

/// `UOPKIT_CC_TIMEOUT`: a positive number of seconds.
pub(super) fn parse_timeout(v: &str) -> std::result::Result<Duration, String> {
    let bad = || "expected a positive number of seconds, such as 120 or 2.5".to_string();
    let secs: f64 = v.trim().parse().map_err(|_| bad())?;
    if secs.is_nan() || secs <= 0.0 {
        return Err(bad());
    }
    Duration::try_from_secs_f64(secs).map_err(|_| bad())
}

/// The CPU feature flags (part of the key because of `-march=native`); empty if unknown.
pub(super) fn cpu_features() -> &'static str {
    static FEATURES: OnceLock<String> = OnceLock::new();
    FEATURES.get_or_init(|| {
        let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let pick = |key: &str| {
            info.lines()
                .find(|l| l.split(':').next().is_some_and(|k| k.trim() == key))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
                .unwrap_or_default()
        };
        format!(
            "{}|{}|{}",
            std::env::consts::ARCH,
            pick("model name"),
            pick("flags")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::Error;

    #[test]
    fn timeouts_and_command_lines_parse() {
        assert_eq!(parse_timeout("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_timeout(" 0.5 "), Ok(Duration::from_millis(500)));
        for bad in ["", "0", "-1", "abc", "NaN", "inf", "1e400"] {
            assert!(parse_timeout(bad).is_err(), "{bad}");
        }
        let (cc, args) = split_command("UOPKIT_CC", "gcc -O3 '-DX=a b'").unwrap();
        assert_eq!(
            (cc.as_str(), args),
            ("gcc", vec!["-O3".to_string(), "-DX=a b".into()])
        );
        assert_eq!(split_command("UOPKIT_CC", "  ").unwrap().0, "cc");
        let e = split_command("UOPKIT_CC", "gcc 'oops")
            .unwrap_err()
            .to_error();
        assert!(
            matches!(&e, Error::BadSetting { name, .. } if name == "UOPKIT_CC"),
            "{e}"
        );
    }
}
