//! tinygrad's own rewrite rules, checked against the oracle: random index expressions over
//! bounded loop variables go to `bridges/tinygrad/rules.py`, tinygrad 0.14.0 applies one of
//! its rule sets (`graph_rewrite(expr, symbolic)`, …), the rewritten expression comes back,
//! and the oracle checks that before and after mean the same for every assignment of the
//! variables, bit for bit (undefined behaviour counts as equal only on both sides).
//!
//! * [`check_tinygrad_rules`] runs a seeded budget of expressions; a failure is shrunk by
//!   proptest (the tape of [`super::expr`]) to a small [`Counterexample`] and written as a
//!   regression case (see [`counterexample_case`]).
//! * The expressions ([`index_arith`]) are index arithmetic as tinygrad's kernels have it:
//!   `RANGE`s with small ends, `+ - *` and `max` with small constants, floor and C division
//!   and modulo by non-zero constants, comparisons (bool roots) and `where`. Each is in one
//!   [`IndexDtype`]: int64 sent as tinygrad's `weakint` (the dtype of tinygrad's index
//!   arithmetic, which its general div/mod folding matches; see rules.py), int64 sent as
//!   tinygrad's concrete `int64`, or int32 (`dtypes.int`, the lowered index dtype, int32
//!   `RANGE`s). weakint is unbounded, tinygrad's rules treat int64/int32 as not
//!   overflowing, and uopkit's integers wrap, so an expression whose intermediate values
//!   could leave ±2^(bits−2) ([`fits`]) is not sent. Every assignment of the variables is
//!   evaluated (at most 8·8·8 = 512).
//! * A run is a sequence of seeded batches ([`BATCH`]); a time budget stops it between
//!   batches.
//! * The bridge is a child process (never the oracle's): its death, a timeout or a broken
//!   answer is a [`RulesError`], never a panic.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestError};
use serde_json::{json, Value as Json};
use uopkit_interp::ir::{Arg, DType, Graph, Node, NodeId, Op};
use uopkit_interp::scalar::cast::to_i128;
use uopkit_interp::scalar::literal;

use super::expr::{assignments, loop_vars, same_meaning, show, tape, Expr, ExprBuilder};
use super::rules::seeded_runner;
use crate::case::NodeJson;

use DType::*;

/// What a run checks.
#[derive(Clone, Debug)]
pub struct TinygradRulesConfig {
    /// Expressions generated (each sent once; shrinking sends more).
    pub cases: u32,
    pub seed: u64,
    /// No batch of [`BATCH`] expressions starts after this (None: no limit).
    pub time_budget: Option<Duration>,
    /// The dtypes expressions are generated in (each expression in one, drawn uniformly).
    pub dtypes: Vec<IndexDtype>,
    /// Shrinking steps proptest may take on a failure.
    pub max_shrink_iters: u32,
    /// A deliberately wrong tinygrad rule to switch on in the bridge (`--wrong NAME`:
    /// `mod-drop-bound`, `div-drop-carry`); None: tinygrad's own rules.
    pub fault: Option<String>,
    /// Where the shrunk counterexample is written as a case; None: not written.
    pub case_dir: Option<PathBuf>,
    /// How long one answer (or the handshake) may take.
    pub timeout: Duration,
    /// The Python interpreter; None: `UOPKIT_TINYGRAD_PYTHON`, else `<repo>/.venv/bin/python`
    /// if it exists, else `python3` (as `backends::registry::tinygrad_spawn`).
    pub python: Option<String>,
}

impl Default for TinygradRulesConfig {
    fn default() -> Self {
        TinygradRulesConfig {
            cases: 1000,
            seed: 0x7196_2026,
            time_budget: None,
            dtypes: IndexDtype::ALL.to_vec(),
            max_shrink_iters: 2048,
            fault: None,
            case_dir: None,
            timeout: Duration::from_secs(60),
            python: None,
        }
    }
}

/// How a passing run went.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub rule_set: String,
    /// Expressions generated.
    pub cases: u32,
    /// Sent to tinygrad and checked (the rest could overflow and were not sent).
    pub checked: u32,
    /// Of those, per dtype.
    pub checked_by_dtype: BTreeMap<IndexDtype, u32>,
    /// Of those, the ones whose value is a bool (a comparison).
    pub bool_roots: u32,
    /// Of those, the ones tinygrad changed.
    pub rewritten: u32,
    /// Skipped because their values could leave their dtype (see [`fits`]).
    pub may_overflow: u32,
    /// Answered `unsupported` (an op or dtype either side cannot map), with the first reasons.
    pub unsupported: u32,
    pub unsupported_reasons: Vec<String>,
    /// tinygrad raised on the expression, with the first messages.
    pub raised: u32,
    pub raised_messages: Vec<String>,
    /// Variable assignments evaluated (before and after each).
    pub assignments: u64,
    pub seconds: f64,
    /// The time budget ran out before `cases` expressions.
    pub stopped_by_time: bool,
}

impl Report {
    /// The checked expressions per dtype, as `int32 12, int64 40, …`.
    pub fn by_dtype(&self) -> String {
        self.checked_by_dtype
            .iter()
            .map(|(d, n)| format!("{d} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Expressions checked per second.
    pub fn rate(&self) -> f64 {
        self.checked as f64 / self.seconds.max(1e-9)
    }
}

/// A rewrite tinygrad made that changes the meaning, shrunk.
#[derive(Clone, Debug)]
pub struct Counterexample {
    pub rule_set: String,
    pub fault: Option<String>,
    /// How the expression's integers were sent.
    pub dtype: IndexDtype,
    /// The expression sent and what tinygrad made of it (`show` form).
    pub before: String,
    pub after: String,
    /// The first assignment that differs and both outcomes.
    pub message: String,
    /// Nodes of the shrunk expression.
    pub nodes: usize,
    /// The case written (when `case_dir` was given).
    pub case_path: Option<PathBuf>,
}

impl std::fmt::Display for Counterexample {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "tinygrad's {}{} changes the meaning of an expression ({} nodes, sent as {}):\n  before: {}\n  after:  {}\n  {}",
            self.rule_set,
            self.fault.as_deref().map(|n| format!(" (with the wrong rule {n})")).unwrap_or_default(),
            self.nodes,
            self.dtype,
            self.before,
            self.after,
            self.message
        )?;
        if let Some(p) = &self.case_path {
            write!(f, "\n  case: {}", p.display())?;
        }
        Ok(())
    }
}

/// Why a run could not be completed.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    /// tinygrad 0.14.0 is not importable by the interpreter (or the fault is unknown).
    #[error("the tinygrad rules bridge is unavailable: {0}")]
    Unavailable(String),
    #[error("cannot start the tinygrad rules bridge ({program}): {reason}")]
    Spawn { program: String, reason: String },
    /// The child died, timed out, or answered something that is not the protocol.
    #[error("the tinygrad rules bridge failed: {0}")]
    Child(String),
    /// The bridge refused the request as malformed, or named a rule set it does not have.
    #[error("the tinygrad rules bridge rejected the request: {0}")]
    Rejected(String),
    #[error("writing the counterexample case: {0}")]
    Write(String),
}

/// A failing run: a counterexample, or an error that stopped it.
#[derive(Debug)]
pub enum Failure {
    Counterexample(Box<Counterexample>),
    Error(RulesError),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Counterexample(c) => c.fmt(f),
            Failure::Error(e) => e.fmt(f),
        }
    }
}

impl From<RulesError> for Failure {
    fn from(e: RulesError) -> Self {
        Failure::Error(e)
    }
}

// ------------------------------------------------------------------------------------------
// The child process

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The interpreter the bridge runs under (see [`TinygradRulesConfig::python`]).
pub fn python(cfg: &TinygradRulesConfig) -> String {
    python_origin(cfg).0
}

/// The interpreter the bridge runs under and where that choice came from
/// (`the configuration`, `UOPKIT_TINYGRAD_PYTHON`, `the repository's .venv`, `PATH`), for
/// reports: a run under a modified tinygrad should say so.
pub fn python_origin(cfg: &TinygradRulesConfig) -> (String, &'static str) {
    if let Some(p) = &cfg.python {
        return (p.clone(), "the configuration");
    }
    let venv = repo_root().join(".venv").join("bin").join("python");
    match std::env::var("UOPKIT_TINYGRAD_PYTHON") {
        Ok(p) if !p.is_empty() => (p, "UOPKIT_TINYGRAD_PYTHON"),
        _ if venv.is_file() => (
            venv.to_string_lossy().into_owned(),
            "the repository's .venv",
        ),
        _ => ("python3".to_string(), "PATH"),
    }
}

/// `bridges/tinygrad/rules.py` of this repository.
pub fn bridge_path() -> PathBuf {
    repo_root()
        .join("bridges")
        .join("tinygrad")
        .join("rules.py")
}

/// A running `rules.py`, killed (with its process group) when dropped.
pub struct RulesBridge {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    stderr: Arc<Mutex<Vec<String>>>,
    timeout: Duration,
    next_id: u64,
    /// The handshake's answer.
    pub hello: Json,
}

impl RulesBridge {
    /// Starts the bridge and checks its handshake (an `unavailable` answer is
    /// [`RulesError::Unavailable`]).
    pub fn start(cfg: &TinygradRulesConfig) -> Result<Self, RulesError> {
        let program = python(cfg);
        let mut cmd = Command::new(&program);
        cmd.arg(bridge_path());
        if let Some(f) = &cfg.fault {
            cmd.args(["--wrong", f]);
        }
        cmd.env_remove("UOPKIT_TINYGRAD_RULE_FAULT")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd.spawn().map_err(|e| RulesError::Spawn {
            program: program.clone(),
            reason: e.to_string(),
        })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            return Err(RulesError::Spawn {
                program,
                reason: "the child's pipes are missing".into(),
            });
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
        let tail = Arc::new(Mutex::new(Vec::new()));
        let t2 = tail.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let mut t = t2.lock().unwrap_or_else(|e| e.into_inner());
                if t.len() == 12 {
                    t.remove(0);
                }
                t.push(line);
            }
        });
        let mut b = RulesBridge {
            child,
            stdin,
            lines,
            stderr: tail,
            timeout: cfg.timeout,
            next_id: 1,
            hello: Json::Null,
        };
        let hello = b.exchange(&json!({"type": "hello"}))?;
        if hello.get("type").and_then(Json::as_str) != Some("hello") {
            return Err(RulesError::Child(format!(
                "the handshake answer is not a hello: {hello}"
            )));
        }
        if let Some(why) = hello.get("unavailable").and_then(Json::as_str) {
            return Err(RulesError::Unavailable(why.to_string()));
        }
        b.hello = hello;
        Ok(b)
    }

    fn stderr_tail(&self) -> String {
        std::thread::sleep(Duration::from_millis(20));
        let t = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        if t.is_empty() {
            String::new()
        } else {
            format!("; its stderr ended with:\n{}", t.join("\n"))
        }
    }

    fn exchange(&mut self, msg: &Json) -> Result<Json, RulesError> {
        let line = format!("{msg}\n");
        if let Err(e) = self
            .stdin
            .write_all(line.as_bytes())
            .and_then(|()| self.stdin.flush())
        {
            return Err(RulesError::Child(format!(
                "cannot write to it: {e}{}",
                self.stderr_tail()
            )));
        }
        let text = match self.lines.recv_timeout(self.timeout) {
            Ok(t) => t,
            Err(RecvTimeoutError::Timeout) => {
                self.kill();
                return Err(RulesError::Child(format!(
                    "no answer within {:.0} s; the process was killed{}",
                    self.timeout.as_secs_f64(),
                    self.stderr_tail()
                )));
            }
            Err(RecvTimeoutError::Disconnected) => {
                // Its stdout closed; it may still be running (it closed the pipe itself).
                let status = match self.child.try_wait() {
                    Ok(Some(s)) => s.to_string(),
                    _ => {
                        self.kill();
                        "stdout closed; the process was killed".to_string()
                    }
                };
                return Err(RulesError::Child(format!(
                    "the process ended ({status}){}",
                    self.stderr_tail()
                )));
            }
        };
        serde_json::from_str(&text)
            .map_err(|e| RulesError::Child(format!("an answer that is not JSON ({e}): {text}")))
    }

    fn kill(&mut self) {
        let pid = self.child.id() as i32;
        // SAFETY: a plain syscall on our own child's process group.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
        let _ = self.child.kill();
    }

    /// Sends `e` to be rewritten by `rule_set`, its integers as `dtype` says (int64 as
    /// tinygrad's weakint, or as a concrete int64 / int32).
    pub fn rewrite(
        &mut self,
        rule_set: &str,
        e: &Expr,
        dtype: IndexDtype,
    ) -> Result<Rewritten, RulesError> {
        let (nodes, _, file_id) = super::export::graph_nodes(&e.graph, &[e.root]);
        let id = self.next_id;
        self.next_id += 1;
        let req = json!({
            "type": "rewrite", "id": id, "rule_set": rule_set,
            "graph": nodes, "roots": [file_id[&e.root]], "weak": dtype.weak(),
        });
        let a = self.exchange(&req)?;
        if a.get("id").and_then(Json::as_u64) != Some(id) {
            return Err(RulesError::Child(format!(
                "an answer for another request (expected id {id}): {a}"
            )));
        }
        let text = |k: &str| a.get(k).and_then(Json::as_str).unwrap_or("").to_string();
        match a.get("type").and_then(Json::as_str) {
            Some("result") => {
                let (g, roots) = parse_result(&a).map_err(|m| {
                    RulesError::Child(format!("request {id}: a result uopkit cannot read: {m}"))
                })?;
                match roots.as_slice() {
                    [r] => Ok(Rewritten::To(g, *r)),
                    _ => Err(RulesError::Child(format!(
                        "request {id}: {} roots for one",
                        roots.len()
                    ))),
                }
            }
            Some("unsupported") => Ok(Rewritten::Unsupported(text("reason"))),
            Some("error") if text("kind") == "tinygrad_raised" => {
                Ok(Rewritten::Raised(text("message")))
            }
            Some("error") => Err(RulesError::Rejected(text("message"))),
            _ => Err(RulesError::Child(format!(
                "request {id}: an unknown answer: {a}"
            ))),
        }
    }
}

impl Drop for RulesBridge {
    fn drop(&mut self) {
        self.kill();
        let _ = self.child.wait();
    }
}

/// What the bridge made of one expression.
pub enum Rewritten {
    /// The rewritten expression: its own graph and root.
    To(Graph, NodeId),
    Unsupported(String),
    Raised(String),
}

/// A result's canonical nodes as a graph (CONST literals, RANGE axes, ALU ops without arg).
fn parse_result(a: &Json) -> Result<(Graph, Vec<NodeId>), String> {
    let nodes: Vec<NodeJson> =
        serde_json::from_value(a.get("graph").cloned().unwrap_or(Json::Null))
            .map_err(|e| format!("graph: {e}"))?;
    let roots: Vec<u64> = serde_json::from_value(a.get("roots").cloned().unwrap_or(Json::Null))
        .map_err(|e| format!("roots: {e}"))?;
    let mut g = Graph::new();
    let mut map: BTreeMap<u64, NodeId> = BTreeMap::new();
    for n in &nodes {
        let src = n
            .src
            .iter()
            .map(|s| {
                map.get(s)
                    .copied()
                    .ok_or_else(|| format!("node {}: source {s} is not an earlier node", n.id))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let arg = match n.op {
            Op::CONST => Arg::Const(
                literal::parse(n.dtype, &n.arg).map_err(|m| format!("node {}: {m}", n.id))?,
            ),
            Op::RANGE => Arg::Index(
                n.arg
                    .as_u64()
                    .ok_or_else(|| format!("node {}: RANGE axis {}", n.id, n.arg))?
                    as usize,
            ),
            _ if n.arg.is_null() => Arg::None,
            op => return Err(format!("node {}: {op} with an arg {}", n.id, n.arg)),
        };
        let want = match n.op {
            Op::CONST => 0,
            Op::RANGE | Op::CAST | Op::BITCAST | Op::NEG => 1,
            Op::WHERE | Op::MULACC => 3,
            op if op.is_alu() => 2,
            op => return Err(format!("node {}: {op} is not an expression op", n.id)),
        };
        if src.len() != want {
            return Err(format!("node {}: {} has {} sources", n.id, n.op, src.len()));
        }
        let id = g.add(Node {
            op: n.op,
            dtype: n.dtype,
            src,
            arg,
        });
        map.insert(n.id, id);
    }
    let roots = roots
        .iter()
        .map(|r| {
            map.get(r)
                .copied()
                .ok_or_else(|| format!("root {r} is not a node"))
        })
        .collect::<Result<_, _>>()?;
    Ok((g, roots))
}

/// `after` (in its own graph) added to a copy of `before`'s graph: the graph and both roots.
pub fn merged(before: &Expr, after: &Graph, root: NodeId) -> (Graph, NodeId) {
    let mut g = before.graph.clone();
    let mut map: BTreeMap<NodeId, NodeId> = BTreeMap::new();
    for id in after.reachable(&[root]) {
        let n = after.node(id);
        let new = g.add(Node {
            src: n.src.iter().map(|s| map[s]).collect(),
            ..n.clone()
        });
        map.insert(id, new);
    }
    (g, map[&root])
}

// ------------------------------------------------------------------------------------------
// Expressions

/// The dtype an expression's index arithmetic is in, and how it is sent to tinygrad.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IndexDtype {
    /// uopkit int64, sent as tinygrad's `weakint` (the dtype of its index arithmetic before
    /// lowering; the general div/mod folding matches only it).
    WeakInt64,
    /// uopkit int64 as tinygrad's `int64` (a concrete dtype: index arithmetic after lowering
    /// when an index can leave int32).
    Int64,
    /// uopkit int32 as tinygrad's `int32` (`dtypes.int`, the usual lowered index dtype):
    /// loop variables are int32 `RANGE`s.
    Int32,
}

impl IndexDtype {
    pub const ALL: [IndexDtype; 3] = [IndexDtype::WeakInt64, IndexDtype::Int64, IndexDtype::Int32];

    /// The uopkit dtype of the expression's integers.
    pub fn dtype(self) -> DType {
        match self {
            IndexDtype::WeakInt64 | IndexDtype::Int64 => Int64,
            IndexDtype::Int32 => Int32,
        }
    }

    /// The request's `weak` list (rules.py): the uopkit dtypes built as `weakint`.
    pub fn weak(self) -> &'static [&'static str] {
        match self {
            IndexDtype::WeakInt64 => &["int64"],
            IndexDtype::Int64 | IndexDtype::Int32 => &[],
        }
    }

    /// How reports name it.
    pub fn label(self) -> &'static str {
        match self {
            IndexDtype::WeakInt64 => "int64 as weakint",
            IndexDtype::Int64 => "int64",
            IndexDtype::Int32 => "int32",
        }
    }
}

impl std::fmt::Display for IndexDtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// An expression of [`index_arith`] with the dtype it is sent as.
#[derive(Clone, Debug)]
pub struct IndexExpr {
    pub expr: Expr,
    pub dtype: IndexDtype,
}

/// The loop variables of [`index_arith`]: up to three axes with ends in 1..=8, `RANGE`s of
/// the expression's dtype (the end a constant of it too).
fn ranged_var(b: &mut ExprBuilder, dt: DType, ends: &[i64]) -> NodeId {
    let k = b.c.below(ends.len());
    let end = b.int(dt, ends[k] as i128);
    b.node(Op::RANGE, dt, vec![end], Arg::Index(k))
}

/// A small constant (never an edge value: weakint, int64 and int32 agree on it).
fn small_const(b: &mut ExprBuilder, dt: DType) -> NodeId {
    let v = match b.c.below(6) {
        0 => b.c.below(5) as i128,
        1 => b.c.pick(&[2i128, 3, 4, 6, 8, 16]),
        2 => -(b.c.range(1, 4) as i128),
        3 => b.c.range(5, 40) as i128,
        _ => b.c.below(10) as i128,
    };
    b.int(dt, v)
}

/// A non-zero divisor: mostly small positive, sometimes negative.
fn divisor(b: &mut ExprBuilder, dt: DType) -> NodeId {
    let v = match b.c.below(8) {
        0 => -(b.c.range(1, 5) as i128),
        1 => b.c.range(5, 24) as i128,
        _ => b.c.pick(&[2i128, 3, 4, 2, 8, 5, 6, 1]),
    };
    b.int(dt, v)
}

const DIVS: &[Op] = &[Op::FLOORDIV, Op::FLOORMOD, Op::CDIV, Op::CMOD];

/// An index expression of `dt` at most `depth` deep.
fn int_expr(b: &mut ExprBuilder, dt: DType, ends: &[i64], depth: usize) -> NodeId {
    let e = int_inner(b, dt, ends, depth);
    b.pool.push(e);
    e
}

fn int_inner(b: &mut ExprBuilder, dt: DType, ends: &[i64], depth: usize) -> NodeId {
    if depth == 0 || !b.c.chance(80) {
        return match b.c.weighted(&[6, 2, 2]) {
            1 => small_const(b, dt),
            2 if !b.pool.is_empty() => {
                let i = b.c.below(b.pool.len());
                b.pool[i]
            }
            _ => ranged_var(b, dt, ends),
        };
    }
    let d = depth - 1;
    match b.c.weighted(&[4, 3, 3, 2, 2, 1, 2]) {
        // a op b (+ - * max)
        0 => {
            let op = b.c.pick(&[Op::ADD, Op::SUB, Op::MUL, Op::ADD, Op::MAX]);
            let x = int_expr(b, dt, ends, d);
            let y = if op == Op::MUL && b.c.chance(60) {
                small_const(b, dt)
            } else {
                int_expr(b, dt, ends, d)
            };
            b.bin(op, x, y)
        }
        // x / c, x % c
        1 => {
            let op = b.c.pick(DIVS);
            let x = int_expr(b, dt, ends, d);
            let k = divisor(b, dt);
            b.bin(op, x, k)
        }
        // (a*c + b) op c
        2 => {
            let op = b.c.pick(DIVS);
            let a = int_expr(b, dt, ends, d);
            let k = divisor(b, dt);
            let m = b.bin(Op::MUL, a, k);
            let s = if b.c.chance(25) {
                m
            } else {
                let y = int_expr(b, dt, ends, d);
                if b.c.chance(50) {
                    b.bin(Op::ADD, y, m)
                } else {
                    b.bin(Op::ADD, m, y)
                }
            };
            b.bin(op, s, k)
        }
        // (x op c1) op c2, and x%c + (x/c)*c
        3 => {
            let x = int_expr(b, dt, ends, d);
            let (k1, k2) = (divisor(b, dt), divisor(b, dt));
            if b.c.chance(30) {
                let (m, q) =
                    b.c.pick(&[(Op::FLOORMOD, Op::FLOORDIV), (Op::CMOD, Op::CDIV)]);
                let r = b.bin(m, x, k1);
                let qq = b.bin(q, x, k1);
                let back = b.bin(Op::MUL, qq, k1);
                return b.bin(Op::ADD, r, back);
            }
            let (o1, o2) = (b.c.pick(DIVS), b.c.pick(DIVS));
            let inner = b.bin(o1, x, k1);
            b.bin(o2, inner, k2)
        }
        // where(cmp, a, b)
        4 => {
            let c = cmp_expr(b, dt, ends, d);
            let x = int_expr(b, dt, ends, d);
            let y = int_expr(b, dt, ends, d);
            b.wher(c, x, y)
        }
        // (v + k) op d: a loop variable plus a constant, divided (the carry across d)
        6 => {
            let v = ranged_var(b, dt, ends);
            let k = small_const(b, dt);
            let x = b.bin(Op::ADD, v, k);
            let op = b.c.pick(DIVS);
            let dv = divisor(b, dt);
            b.bin(op, x, dv)
        }
        // negation, the lowering's flip
        _ => {
            let x = int_expr(b, dt, ends, d);
            let m1 = b.int(dt, -1);
            b.bin(Op::MUL, x, m1)
        }
    }
}

/// A comparison of index expressions (and/or of two): a bool.
fn cmp_expr(b: &mut ExprBuilder, dt: DType, ends: &[i64], d: usize) -> NodeId {
    let op = b.c.pick(&[Op::CMPLT, Op::CMPNE, Op::CMPEQ, Op::CMPLT]);
    let x = int_expr(b, dt, ends, d);
    let y = if b.c.chance(60) {
        small_const(b, dt)
    } else {
        int_expr(b, dt, ends, d)
    };
    let c = b.bin(op, x, y);
    if d > 0 && b.c.chance(20) {
        let other = cmp_expr(b, dt, ends, d - 1);
        let j = b.c.pick(&[Op::AND, Op::OR]);
        return b.bin(j, c, other);
    }
    c
}

/// Index arithmetic over 1–3 loop variables (ends 1..=8) in one of `dtypes` (drawn
/// uniformly; empty: [`IndexDtype::WeakInt64`]): an integer expression (with `where`s of
/// comparisons inside), or a bool comparison of it.
pub fn index_arith(dtypes: &[IndexDtype]) -> impl Strategy<Value = IndexExpr> {
    let dtypes: Vec<IndexDtype> = if dtypes.is_empty() {
        vec![IndexDtype::WeakInt64]
    } else {
        dtypes.to_vec()
    };
    tape(64).prop_map(move |t| {
        let mut b = ExprBuilder::new(&t, super::expr::ExprConfig::default());
        let kind = b.c.pick(&dtypes);
        let dt = kind.dtype();
        let n = 1 + b.c.below(3);
        let ends: Vec<i64> = (0..n).map(|_| b.c.range(1, 8)).collect();
        let root = if b.c.chance(15) {
            cmp_expr(&mut b, dt, &ends, 3)
        } else {
            int_expr(&mut b, dt, &ends, 4)
        };
        IndexExpr {
            expr: b.finish(root),
            dtype: kind,
        }
    })
}

/// Whether every integer value `e` computes stays within ±2^(bits−2) of its dtype (±2^62
/// for int64, ±2^30 for int32) for every assignment, by interval arithmetic
/// (conservative): then no operation wraps, and tinygrad's unbounded weakint (or its
/// concrete int64/int32, whose rules assume no overflow) and uopkit's wrapping integers
/// give the same values.
pub fn fits(e: &Expr) -> bool {
    let g = &e.graph;
    let mut iv: BTreeMap<NodeId, (i128, i128)> = BTreeMap::new();
    for id in g.reachable(&[e.root]) {
        let n = g.node(id);
        let s: Vec<(i128, i128)> = n.src.iter().map(|s| iv[s]).collect();
        let r = match (n.op, &n.arg) {
            (Op::CONST, Arg::Const(bits)) => {
                let v = to_i128(n.dtype, *bits);
                (v, v)
            }
            (Op::RANGE, _) => (0, s[0].1 - 1),
            _ if n.dtype == Bool => (0, 1),
            (Op::ADD, _) => (s[0].0 + s[1].0, s[0].1 + s[1].1),
            (Op::SUB, _) => (s[0].0 - s[1].1, s[0].1 - s[1].0),
            (Op::MUL, _) => {
                let p = [
                    s[0].0 * s[1].0,
                    s[0].0 * s[1].1,
                    s[0].1 * s[1].0,
                    s[0].1 * s[1].1,
                ];
                (*p.iter().min().unwrap_or(&0), *p.iter().max().unwrap_or(&0))
            }
            (Op::MAX, _) => (s[0].0.max(s[1].0), s[0].1.max(s[1].1)),
            (Op::WHERE, _) => (s[1].0.min(s[2].0), s[1].1.max(s[2].1)),
            // |x / c| ≤ |x| and |x % c| ≤ |x| for a non-zero c.
            (Op::CDIV | Op::CMOD | Op::FLOORDIV | Op::FLOORMOD, _) => {
                let m = s[0]
                    .0
                    .abs()
                    .max(s[0].1.abs())
                    .max(s[1].0.abs())
                    .max(s[1].1.abs());
                (-m, m)
            }
            _ => return false,
        };
        if n.dtype != Bool {
            if !matches!(n.dtype, Int64 | Int32) {
                return false;
            }
            let lim: i128 = 1 << (n.dtype.bits() - 2);
            if r.0 < -lim || r.1 > lim {
                return false;
            }
        }
        iv.insert(id, r);
    }
    true
}

// ------------------------------------------------------------------------------------------
// The check

/// Expressions per batch of a run: each batch is a seeded proptest run of its own (seed
/// derived from [`TinygradRulesConfig::seed`] and the batch number), so a run is
/// deterministic given (seed, cases), and a time budget stops it between batches.
pub const BATCH: u32 = 256;

/// Checks `rule_set` (one of rules.py's whitelist: `symbolic_simple`, `symbolic`, `sym`,
/// `commutative`) on `cfg.cases` expressions from [`index_arith`] (in `cfg.dtypes`),
/// seeded, in batches of [`BATCH`]; with `cfg.time_budget`, no batch starts after it. Ok
/// with the report; a meaning-changing rewrite is shrunk and returned (and written as a
/// case under `cfg.case_dir`).
pub fn check_tinygrad_rules(rule_set: &str, cfg: &TinygradRulesConfig) -> Result<Report, Failure> {
    check_tinygrad_rules_with(rule_set, cfg, &mut |_| {})
}

/// [`check_tinygrad_rules`], calling `progress` after each batch.
pub fn check_tinygrad_rules_with(
    rule_set: &str,
    cfg: &TinygradRulesConfig,
    progress: &mut dyn FnMut(&Report),
) -> Result<Report, Failure> {
    let bridge = RefCell::new(RulesBridge::start(cfg)?);
    let t0 = Instant::now();
    let report = RefCell::new(Report {
        rule_set: rule_set.to_string(),
        ..Report::default()
    });
    let strategy = index_arith(&cfg.dtypes);
    let mut batch = 0u64;
    loop {
        let done = report.borrow().cases;
        if done >= cfg.cases {
            break;
        }
        if cfg.time_budget.is_some_and(|b| t0.elapsed() >= b) {
            report.borrow_mut().stopped_by_time = true;
            break;
        }
        let n = BATCH.min(cfg.cases - done);
        let seed = cfg
            .seed
            .wrapping_add(batch.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        batch += 1;
        let error: RefCell<Option<RulesError>> = RefCell::new(None);
        let failing = RefCell::new(false);
        let mut runner = seeded_runner(n, seed, cfg.max_shrink_iters);
        let result = runner.run(&strategy, |ie| {
            if error.borrow().is_some() {
                return Ok(());
            }
            let counting = !*failing.borrow();
            let mut rep = report.borrow_mut();
            if counting {
                rep.cases += 1;
            }
            let e = &ie.expr;
            if !fits(e) {
                if counting {
                    rep.may_overflow += 1;
                }
                return Ok(());
            }
            let answer = bridge.borrow_mut().rewrite(rule_set, e, ie.dtype);
            let (g2, r2) = match answer {
                Ok(Rewritten::To(g2, r2)) => (g2, r2),
                Ok(Rewritten::Unsupported(why)) => {
                    if counting {
                        rep.unsupported += 1;
                        if rep.unsupported_reasons.len() < 5 {
                            rep.unsupported_reasons.push(format!("{why} (on {e:?})"));
                        }
                    }
                    return Ok(());
                }
                Ok(Rewritten::Raised(m)) => {
                    if counting {
                        rep.raised += 1;
                        if rep.raised_messages.len() < 5 {
                            rep.raised_messages.push(format!("{m} (on {e:?})"));
                        }
                    }
                    return Ok(());
                }
                Err(err) => {
                    *error.borrow_mut() = Some(err);
                    return Ok(());
                }
            };
            let (g, after) = merged(e, &g2, r2);
            if counting {
                rep.checked += 1;
                *rep.checked_by_dtype.entry(ie.dtype).or_insert(0) += 1;
                if g.node(e.root).dtype == Bool {
                    rep.bool_roots += 1;
                }
                rep.rewritten += (show(&g, after) != format!("{e:?}")) as u32;
                if let Ok(vars) = loop_vars(&g, &[e.root, after]) {
                    rep.assignments += assignments(&vars) as u64;
                }
            }
            same_meaning(&g, e.root, after).map_err(|m| {
                *failing.borrow_mut() = true;
                TestCaseError::fail(format!("{m}\n  after:  {}", show(&g, after)))
            })
        });
        if let Some(err) = error.into_inner() {
            return Err(Failure::Error(err));
        }
        report.borrow_mut().seconds = t0.elapsed().as_secs_f64();
        match result {
            Ok(()) => progress(&report.borrow()),
            Err(TestError::Abort(why)) => {
                return Err(Failure::Error(RulesError::Child(format!(
                    "the property run aborted: {why}"
                ))))
            }
            Err(TestError::Fail(_, ie)) => {
                let mut b = bridge.into_inner();
                return Err(shrunk_counterexample(&mut b, rule_set, cfg, &ie));
            }
        }
    }
    let mut report = report.into_inner();
    report.seconds = t0.elapsed().as_secs_f64();
    Ok(report)
}

/// The failure proptest found (`ie`, already shrunk on its tape), shrunk further, sent once
/// more for its rewritten form, and written as a case under `cfg.case_dir`.
fn shrunk_counterexample(
    b: &mut RulesBridge,
    rule_set: &str,
    cfg: &TinygradRulesConfig,
    ie: &IndexExpr,
) -> Failure {
    let dtype = ie.dtype;
    let e = match shrink_expr(&ie.expr, 4000, &mut |x: &Expr| fails(b, rule_set, x, dtype)) {
        Ok(e) => e,
        Err(err) => return Failure::Error(err),
    };
    let (g, after) = match b.rewrite(rule_set, &e, dtype) {
        Ok(Rewritten::To(g2, r2)) => merged(&e, &g2, r2),
        Ok(_) => {
            return Failure::Error(RulesError::Child(
                "the shrunk counterexample was not rewritten the second time".into(),
            ))
        }
        Err(err) => return Failure::Error(err),
    };
    let message = same_meaning(&g, e.root, after)
        .err()
        .unwrap_or_else(|| "the second rewrite kept the meaning".into());
    let mut cx = Counterexample {
        rule_set: rule_set.to_string(),
        fault: cfg.fault.clone(),
        dtype,
        before: format!("{e:?}"),
        after: show(&g, after),
        message,
        nodes: e.size(),
        case_path: None,
    };
    if let Some(dir) = &cfg.case_dir {
        let case = match counterexample_case(&e, &cx) {
            Ok(c) => c,
            Err(m) => return Failure::Error(RulesError::Write(m)),
        };
        match crate::fuzz::write_new(dir, "tinygrad_rules", &case) {
            Ok(path) => cx.case_path = Some(path),
            Err(err) => return Failure::Error(RulesError::Write(err.to_string())),
        }
    }
    Failure::Counterexample(Box::new(cx))
}

/// Whether `rule_set` changes the meaning of `e` sent as `dtype` (false when `e` could
/// overflow, or tinygrad does not answer with an expression).
fn fails(
    b: &mut RulesBridge,
    rule_set: &str,
    e: &Expr,
    dtype: IndexDtype,
) -> Result<bool, RulesError> {
    if !fits(e) {
        return Ok(false);
    }
    Ok(match b.rewrite(rule_set, e, dtype)? {
        Rewritten::To(g2, r2) => {
            let (g, after) = merged(e, &g2, r2);
            same_meaning(&g, e.root, after).is_err()
        }
        _ => false,
    })
}

/// `e` with node `at` replaced by `by` (a source of `at`, or a node `at` does not reach).
fn replaced(e: &Expr, at: NodeId, by: NodeId) -> Expr {
    let g = &e.graph;
    let mut t = Graph::new();
    let mut map: BTreeMap<NodeId, NodeId> = BTreeMap::new();
    let copy = |t: &mut Graph, map: &mut BTreeMap<NodeId, NodeId>, id: NodeId| {
        let n = g.node(id);
        let new = t.add(Node {
            src: n.src.iter().map(|s| map[s]).collect(),
            ..n.clone()
        });
        map.insert(id, new);
    };
    for id in g.reachable(&[by]) {
        copy(&mut t, &mut map, id);
    }
    for id in g.reachable(&[e.root]) {
        if map.contains_key(&id) {
            continue;
        }
        if id == at {
            map.insert(at, map[&by]);
        } else {
            copy(&mut t, &mut map, id);
        }
    }
    Expr {
        root: map[&e.root],
        graph: t,
    }
}

/// Greedy shrinking of a failing expression after proptest's (which works on the tape): a
/// node is replaced by one of its sources of the same dtype, or an integer node by 0 or 1,
/// while `still_fails`; at most `budget` checks.
pub fn shrink_expr(
    e: &Expr,
    budget: usize,
    still_fails: &mut dyn FnMut(&Expr) -> Result<bool, RulesError>,
) -> Result<Expr, RulesError> {
    let mut cur = e.clone();
    let mut checks = 0;
    'outer: loop {
        let order = cur.graph.reachable(&[cur.root]);
        for &id in order.iter().rev() {
            let n = cur.graph.node(id).clone();
            if matches!(n.op, Op::CONST | Op::RANGE) {
                continue;
            }
            let mut cands: Vec<NodeId> = n
                .src
                .iter()
                .copied()
                .filter(|&s| cur.graph.node(s).dtype == n.dtype)
                .collect();
            if matches!(n.dtype, Int64 | Int32) {
                let mut g = cur.graph.clone();
                for v in [0u64, 1] {
                    cands.push(g.add(Node {
                        op: Op::CONST,
                        dtype: n.dtype,
                        src: vec![],
                        arg: Arg::Const(v),
                    }));
                }
                cur.graph = g;
            }
            for c in cands {
                if checks >= budget {
                    break 'outer;
                }
                checks += 1;
                let x = replaced(&cur, id, c);
                if x.size() < cur.size() && still_fails(&x)? {
                    cur = x;
                    continue 'outer;
                }
            }
        }
        break;
    }
    Ok(cur)
}

/// The counterexample's expression as a tensor-level regression case: each loop variable
/// becomes an int64 input buffer holding its value for every assignment (row-major over the
/// axes, as [`assignment`]), the output is the expression over all of them, and the
/// expected values are the oracle's (the regression-case convention of
/// `corpus/regressions/README.md`); the description holds tinygrad's rewritten form.
pub fn counterexample_case(e: &Expr, cx: &Counterexample) -> Result<crate::Case, String> {
    let g = &e.graph;
    let vars = loop_vars(g, &[e.root])?;
    let m = assignments(&vars);
    let which: Vec<usize> = (0..m).collect();
    let (mut t, roots, inputs) = super::expr::with_buffers(g, &[e.root], &vars, &which)?;
    let mut root = roots[0];
    if vars.is_empty() {
        // No loop variable: a scalar; the case still has one element.
        root = t.add(Node {
            op: Op::RESHAPE,
            dtype: t.node(root).dtype,
            src: vec![root],
            arg: Arg::Shape(vec![1]),
        });
    }
    let description = format!(
        "expected values from the oracle at discovery time (tinygrad rule regression): tinygrad 0.14.0's {}{} rewrote {} (sent as {}) into {} ({}); the loop variables are input buffers r<axis> over all {m} assignments",
        cx.rule_set,
        cx.fault.as_deref().map(|f| format!(" with the deliberately wrong rule {f}")).unwrap_or_default(),
        cx.before,
        cx.dtype,
        cx.after,
        cx.message
    );
    let mut case = super::export::export(
        &t,
        &inputs,
        &[("out".to_string(), root)],
        &description,
        &["regression", "tinygrad-rules", &cx.rule_set],
    )?;
    super::export::fill_expect_from_oracle(&mut case)?;
    Ok(case)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::ValueTree;

    #[test]
    fn generated_expressions_mostly_fit_and_evaluate() {
        let mut r = seeded_runner(1, 3, 0);
        let s = index_arith(&IndexDtype::ALL);
        let (mut fit, mut divs) = (0, 0);
        let mut kinds = std::collections::BTreeSet::new();
        for _ in 0..300 {
            let ie = s.new_tree(&mut r).unwrap().current();
            kinds.insert(ie.dtype);
            let e = ie.expr;
            let g = &e.graph;
            divs += g
                .reachable(&[e.root])
                .iter()
                .filter(|&&n| DIVS.contains(&g.node(n).op))
                .count();
            if fits(&e) {
                fit += 1;
                let vars = loop_vars(g, &[e.root]).unwrap();
                assert!(assignments(&vars) <= 512);
                let v = super::super::expr::evaluate(g, e.root, &vars).unwrap();
                assert!(v.iter().all(|o| o.is_ok()), "UB in {e:?}");
            }
        }
        assert!(fit > 250 && divs > 300, "{fit} fit, {divs} div/mod nodes");
        assert_eq!(kinds.len(), 3, "every dtype is drawn: {kinds:?}");
    }

    #[test]
    fn fits_rejects_a_product_that_overflows() {
        let mut b = ExprBuilder::new(&[], super::super::expr::ExprConfig::default());
        let r = b.range(0, 4);
        let big = b.int(Int64, 1 << 40);
        let m = b.bin(Op::MUL, r, big);
        let m2 = b.bin(Op::MUL, m, big);
        let g = b.g;
        // 3·2^40 fits; 3·2^80 does not.
        assert!(fits(&Expr {
            graph: g.clone(),
            root: m
        }));
        assert!(!fits(&Expr { graph: g, root: m2 }));
    }
}
