//! A backend in other processes: a pool of child processes speaking `uopkit-backend/1`
//! (`docs/backend-protocol.md`). Used for uopkit's own compiled backends (the child is this
//! program in worker mode, `crate::worker`) and for `exec:CMD` backends.
//!
//! Every failure of the child — death by a signal, exit, no answer within the per-case time
//! limit, running out of its memory limit, an answer that breaks the protocol — is that
//! backend failing that case ([`BackendError::Died`], with the reason and the last lines of
//! its stderr); the child is killed (with its process group) and a fresh one is started for
//! the next case.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{Accepts, Backend, BackendError, Job, Ran, Variant};
use crate::protocol::{self, Answer, Hello, Level, Options, Request, ResultAnswer};

/// Limits every child runs under.
#[derive(Clone, Debug)]
pub struct Limits {
    /// No answer within this time: the child is killed and the case fails.
    pub timeout: Duration,
    /// Address-space limit of the child in bytes (RLIMIT_AS); None: unlimited.
    pub memory: Option<u64>,
    /// How long the child may take to answer the handshake.
    pub start_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(120),
            memory: default_memory(),
            start_timeout: Duration::from_secs(60),
        }
    }
}

/// Half the machine's memory (`MemTotal` in /proc/meminfo), at least 2 GiB; None when unknown.
pub fn default_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = info
        .lines()
        .find(|l| l.starts_with("MemTotal:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some((kib.saturating_mul(1024) / 2).max(2 << 30))
}

/// How to start a child.
#[derive(Clone, Debug)]
pub struct Spawn {
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

impl Spawn {
    /// `exec:CMD`: CMD split like a shell does.
    pub fn from_command_line(cmd: &str) -> Result<Spawn, String> {
        let words = shell_words::split(cmd).map_err(|e| format!("exec:{cmd}: {e}"))?;
        let (program, args) = words
            .split_first()
            .ok_or_else(|| "exec: needs a command (exec:CMD)".to_string())?;
        Ok(Spawn {
            program: program.clone(),
            args: args.to_vec(),
            env: vec![],
        })
    }
}

/// One live child.
struct Child1 {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    /// The child said it could not allocate (seen anywhere in its stderr).
    oom: Arc<AtomicBool>,
}

const STDERR_LINES: usize = 12;

impl Child1 {
    fn kill(&mut self) {
        let pid = self.child.id() as i32;
        // SAFETY: plain syscalls on our own child's process group and pid.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
        let _ = self.child.kill();
    }

    /// Why the child is gone (after it closed its stdout or was killed).
    fn death(&mut self, what: &str) -> String {
        let status = match self.child.try_wait() {
            Ok(Some(s)) => Some(s),
            _ => {
                std::thread::sleep(Duration::from_millis(50));
                self.child.try_wait().ok().flatten()
            }
        };
        let status = match status {
            Some(s) => s,
            None => {
                self.kill();
                match self.child.wait() {
                    Ok(s) => s,
                    Err(e) => return format!("{what}; cannot wait for it: {e}"),
                }
            }
        };
        let tail = self.stderr_tail();
        let oom = self.oom.load(Ordering::Relaxed);
        let how = match (status.code(), status.signal()) {
            (_, Some(sig)) if oom => format!("ran out of memory (killed by {})", signal_name(sig)),
            (_, Some(sig)) => format!("was killed by {}", signal_name(sig)),
            (Some(c), _) => format!("exited with status {c}"),
            _ => "ended".to_string(),
        };
        if tail.is_empty() {
            format!("{what}: the process {how}")
        } else {
            format!("{what}: the process {how}; its stderr ended with:\n{tail}")
        }
    }

    fn stderr_tail(&self) -> String {
        // Give the reader thread a moment to collect the last lines.
        std::thread::sleep(Duration::from_millis(20));
        let t = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        t.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

impl Drop for Child1 {
    fn drop(&mut self) {
        self.kill();
        let _ = self.child.wait();
    }
}

pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGABRT => "SIGABRT",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGPIPE => "SIGPIPE",
        _ => return format!("signal {sig}"),
    };
    format!("{name} (signal {sig})")
}

fn spawn(sp: &Spawn, limits: &Limits) -> Result<Child1, String> {
    let mut cmd = Command::new(&sp.program);
    cmd.args(&sp.args)
        .envs(sp.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so that a kill reaches what it started (a C compiler).
        .process_group(0);
    if let Some(bytes) = limits.memory {
        // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let lim = libc::rlimit {
                    rlim_cur: bytes as libc::rlim_t,
                    rlim_max: bytes as libc::rlim_t,
                };
                if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start '{}': {e}", sp.program))?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        let _ = child.kill();
        return Err("the child's pipes are missing".into());
    };
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let tail = Arc::new(Mutex::new(VecDeque::new()));
    let t2 = tail.clone();
    let oom = Arc::new(AtomicBool::new(false));
    let oom2 = oom.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if line.contains("memory allocation of") || line.contains("out of memory") {
                oom2.store(true, Ordering::Relaxed);
            }
            let mut t = t2.lock().unwrap_or_else(|e| e.into_inner());
            if t.len() == STDERR_LINES {
                t.pop_front();
            }
            t.push_back(line);
        }
    });
    Ok(Child1 {
        child,
        stdin,
        lines,
        stderr: tail,
        oom,
    })
}

/// Sends one message and waits for one answer line.
fn exchange(c: &mut Child1, line: &str, timeout: Duration, what: &str) -> Result<Answer, String> {
    if let Err(e) = c
        .stdin
        .write_all(line.as_bytes())
        .and_then(|()| c.stdin.flush())
    {
        return Err(c.death(&format!("{what}: cannot send the request ({e})")));
    }
    let text = match c.lines.recv_timeout(timeout) {
        Ok(t) => t,
        Err(RecvTimeoutError::Timeout) => {
            c.kill();
            let tail = c.stderr_tail();
            return Err(format!(
                "{what}: no answer within {:.0} s (the per-case time limit); the process was killed{}",
                timeout.as_secs_f64(),
                if tail.is_empty() {
                    String::new()
                } else {
                    format!("; its stderr ended with:\n{tail}")
                }
            ));
        }
        Err(RecvTimeoutError::Disconnected) => return Err(c.death(what)),
    };
    serde_json::from_str::<Answer>(&text).map_err(|e| {
        let shown: String = text.chars().take(200).collect();
        format!("{what}: the answer is not a valid protocol message ({e}): {shown}")
    })
}

fn handshake(sp: &Spawn, limits: &Limits) -> Result<(Child1, Hello), String> {
    let mut c = spawn(sp, limits)?;
    let hello = protocol::to_line(&Request::Hello {
        protocol: protocol::PROTOCOL.into(),
    });
    match exchange(&mut c, &hello, limits.start_timeout, "handshake")? {
        Answer::Hello(h) if h.protocol == protocol::PROTOCOL => Ok((c, h)),
        Answer::Hello(h) => Err(format!(
            "handshake: the backend speaks '{}', uopkit speaks '{}'",
            h.protocol,
            protocol::PROTOCOL
        )),
        other => Err(format!(
            "handshake: expected a hello, got {}",
            serde_json::to_string(&other).unwrap_or_default()
        )),
    }
}

/// A backend served by a pool of child processes.
pub struct ProcessBackend {
    name: String,
    spawn: Spawn,
    limits: Limits,
    hello: Hello,
    idle: Mutex<Vec<Child1>>,
    next_id: AtomicU64,
}

impl ProcessBackend {
    /// Starts one child and reads its handshake (so a broken backend is reported once,
    /// before any trial).
    pub fn start(name: impl Into<String>, spawn: Spawn, limits: Limits) -> Result<Self, String> {
        let name = name.into();
        let (c, hello) = handshake(&spawn, &limits)?;
        Ok(ProcessBackend {
            name,
            spawn,
            limits,
            hello,
            idle: Mutex::new(vec![c]),
            next_id: AtomicU64::new(1),
        })
    }

    pub fn hello(&self) -> &Hello {
        &self.hello
    }

    /// The same backend under another trial name.
    pub fn renamed(mut self, name: String) -> Self {
        self.name = name;
        self
    }

    fn checkout(&self) -> Result<Child1, String> {
        let got = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match got {
            Some(c) => Ok(c),
            None => handshake(&self.spawn, &self.limits).map(|(c, _)| c),
        }
    }

    fn checkin(&self, c: Child1) {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).push(c);
    }

    /// One request → one answer on a child; the child goes back to the pool unless it failed.
    fn call(&self, id: u64, line: &str) -> Result<ResultAnswer, BackendError> {
        let mut c = self.checkout().map_err(BackendError::Died)?;
        // A child that died while idle did not fail this case: start a fresh one.
        if matches!(c.child.try_wait(), Ok(Some(_))) {
            drop(c);
            c = handshake(&self.spawn, &self.limits)
                .map(|(c, _)| c)
                .map_err(BackendError::Died)?;
        }
        let ans =
            exchange(&mut c, line, self.limits.timeout, &self.name).map_err(BackendError::Died)?;
        let answer_id = match &ans {
            Answer::Result(r) => Some(r.id),
            Answer::Unsupported { id, .. } | Answer::Error { id, .. } => Some(*id),
            Answer::Hello(_) => None,
        };
        if answer_id != Some(id) {
            return Err(BackendError::Died(format!(
                "{}: answer for request {id} has id {answer_id:?}; the process was replaced",
                self.name
            )));
        }
        match ans {
            Answer::Result(r) => {
                self.checkin(c);
                Ok(r)
            }
            Answer::Unsupported { reason, .. } => {
                self.checkin(c);
                Err(BackendError::Unsupported(reason))
            }
            Answer::Error {
                message, restart, ..
            } => {
                if restart {
                    Err(BackendError::Died(format!(
                        "{message} (the process was replaced)"
                    )))
                } else {
                    self.checkin(c);
                    Err(BackendError::Failed(message))
                }
            }
            Answer::Hello(_) => Err(BackendError::Died("unexpected hello".into())),
        }
    }
}

impl Backend for ProcessBackend {
    fn name(&self) -> &str {
        &self.name
    }

    fn accepts(&self) -> Accepts {
        self.hello.accepts.clone()
    }

    fn allowances(&self) -> Option<String> {
        self.hello.allowances.clone()
    }

    fn role(&self) -> super::Role {
        if self.hello.compile_only {
            super::Role::CompileOnly
        } else {
            super::Role::Candidate
        }
    }

    fn unavailable(&self) -> Option<String> {
        self.hello.unavailable.clone()
    }

    fn kernel_cases(&self) -> bool {
        self.hello.level == Level::Kernel || self.hello.kernel_cases
    }

    fn skip_reason(&self, job: &Job) -> Option<String> {
        match self.hello.level {
            Level::Graph => {
                super::accepts_graph(&self.accepts(), job.graph, job.verified, &job.roots())
            }
            // Checked on the kernel programs once scheduled.
            Level::Kernel => None,
        }
    }

    fn run(&self, job: &Job) -> Result<Ran, BackendError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        match self.hello.level {
            Level::Graph => {
                let (req, order) = protocol::graph_request(
                    id,
                    job.case,
                    job.graph,
                    job.verified,
                    job.inputs,
                    job.outputs,
                    Options {
                        allreduce: job.allreduce.clone(),
                    },
                );
                let line = protocol::to_line(&Request::Run(req.clone()));
                let r = self.call(id, &line)?;
                let outputs = if self.hello.compile_only {
                    vec![]
                } else {
                    let outs = r.outputs.ok_or_else(|| {
                        BackendError::Failed(format!("{}: the result has no outputs", self.name))
                    })?;
                    protocol::output_values(&req, &outs)
                        .map_err(|e| BackendError::Failed(format!("{}: {e}", self.name)))?
                };
                // Facts name graph buffers by request id: translate to case-file ids.
                let facts = r.schedule.map(|mut f| {
                    if let Some(w) = &mut f.writes {
                        for x in w.iter_mut() {
                            if let Some(n) = order.get(*x as usize) {
                                *x = job.file_id_of(*n);
                            }
                        }
                        w.sort_unstable();
                    }
                    f
                });
                // A variant's bits that do not decode are that run's failure, not the trial's:
                // the main outputs are judged first either way.
                let variants = r
                    .variants
                    .into_iter()
                    .map(|v| Variant {
                        outputs: match (v.error, v.outputs) {
                            (Some(e), _) => Err(e),
                            (None, Some(outs)) => protocol::output_values(&req, &outs),
                            (None, None) => Err("the run has neither outputs nor an error".into()),
                        },
                        label: v.label,
                    })
                    .collect();
                Ok(Ran {
                    outputs,
                    facts,
                    schedule: None,
                    variants,
                })
            }
            Level::Kernel => {
                let sched = super::schedule_job(job)?;
                let req = protocol::schedule_request(id, job.case, &sched, job.inputs);
                if let Some(why) = accepts_programs(&self.hello.accepts, &req) {
                    return Err(BackendError::Unsupported(why));
                }
                let line = protocol::to_line(&Request::RunSchedule(req.clone()));
                let r = self.call(id, &line)?;
                let bufs = r.buffers.ok_or_else(|| {
                    BackendError::Failed(format!("{}: the result has no buffers", self.name))
                })?;
                let outputs = protocol::schedule_outputs(&req, &sched, &bufs)
                    .map_err(|e| BackendError::Failed(format!("{}: {e}", self.name)))?;
                Ok(Ran {
                    outputs,
                    facts: Some(super::schedule_facts(&sched, job)),
                    schedule: Some(sched),
                    variants: vec![],
                })
            }
        }
    }

    /// A `run_schedule` request as it is (under this pool's id), on a child: kernel-level
    /// backends, and uopkit's own workers whose backend runs kernel programs (`cpu`). A request
    /// whose buffers or programs are outside the handshake's `accepts` is not sent
    /// (`Unsupported`, the reason naming what).
    fn run_schedule(
        &self,
        req: &protocol::ScheduleRequest,
    ) -> Result<Vec<protocol::BufferBits>, BackendError> {
        if let Some(why) = accepts_programs(&self.hello.accepts, req) {
            return Err(BackendError::Unsupported(why));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut req = req.clone();
        req.id = id;
        let line = protocol::to_line(&Request::RunSchedule(req));
        let r = self.call(id, &line)?;
        r.buffers.ok_or_else(|| {
            BackendError::Failed(format!("{}: the result has no buffers", self.name))
        })
    }
}

/// Why a kernel-level request is outside what the backend accepts.
fn accepts_programs(acc: &Accepts, req: &protocol::ScheduleRequest) -> Option<String> {
    for b in &req.buffers {
        if let Some(d) = &acc.dtypes {
            if !d.contains(&b.dtype) {
                return Some(format!("dtype {} not accepted", b.dtype));
            }
        }
        if let Some(devs) = &acc.devices {
            let kind = b.device.split(':').next().unwrap_or(&b.device);
            if !devs.iter().any(|k| k == kind) {
                return Some(format!("device {} not accepted", b.device));
            }
        }
    }
    for p in &req.programs {
        for i in &p.insts {
            if let Some(ops) = &acc.ops {
                if !ops.contains(&i.op) {
                    return Some(format!("op {} not accepted", i.op));
                }
            }
            if let Some(d) = &acc.dtypes {
                if i.dtype != "void" && !d.contains(&i.dtype) {
                    return Some(format!("dtype {} not accepted", i.dtype));
                }
            }
        }
    }
    None
}
