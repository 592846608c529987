//! Pictures of a case for people: Graphviz DOT text of its tensor graph ([`graph`]), of
//! uopkit's schedule for it ([`schedule`]) and of one kernel's linear program ([`kernel`]);
//! `uopkit dot` prints them, or SVG through the `dot` program ([`to_svg`]).
//!
//! The text is deterministic: nodes and edges come out in graph, step or instruction order
//! (never a hash map's), and every label goes through [`quote`].
//!
//! Nodes are coloured by op class, one fixed palette for all three pictures ([`Class`]):
//!
//! | class | ops | fill |
//! |---|---|---|
//! | storage | BUFFER, PARAM, CONST (and schedule buffers) | `#cfe2f3` light blue |
//! | movement | RESHAPE, EXPAND, PERMUTE, PAD, SHRINK, FLIP | `#d9ead3` light green |
//! | ALU | the op table's ops, CAST, BITCAST | `#fff2cc` light yellow |
//! | reduce | REDUCE | `#fce5cd` light orange |
//! | copy / multi-device | COPY, MSELECT, MSTACK, UNSHARD, ALLREDUCE | `#d9d2e9` lavender |
//! | effect | STORE, AFTER | `#d0d0d0` grey |
//! | loop / memory (kernels) | RANGE, END, SPECIAL, BARRIER, INDEX, LOAD | `#d0e0e3` grey-cyan |
//! | other | SINK, GROUP, CONTIGUOUS, DETACH, CALL | `#ffffff` white |
//!
//! A highlighted node (`--highlight`) keeps its fill and gets a red, bold outline and label;
//! no class uses red.

pub mod graph;
pub mod kernel;
pub mod schedule;

use std::fmt::Write as _;
use std::io::Write as _;

use uopkit_interp::ir::Op;

use crate::case::Case;
use crate::load::{self, LoadError};

/// Which picture.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum What {
    /// The tensor graph: one node per UOp.
    #[default]
    Graph,
    /// The schedule: buffers, kernels and copies, grouped by device.
    Schedule,
    /// One kernel's linear program.
    Kernel,
}

impl std::str::FromStr for What {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "graph" => Ok(What::Graph),
            "schedule" => Ok(What::Schedule),
            "kernel" => Ok(What::Kernel),
            _ => Err(format!("'{s}': expected graph, schedule or kernel")),
        }
    }
}

/// What `uopkit dot` writes.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// DOT text (needs nothing).
    #[default]
    Dot,
    /// SVG, through Graphviz's `dot -Tsvg`.
    Svg,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "dot" => Ok(Format::Dot),
            "svg" => Ok(Format::Svg),
            _ => Err(format!("'{s}': expected dot or svg")),
        }
    }
}

/// What [`case_dot`] draws.
#[derive(Clone, Debug, Default)]
pub struct DotOpts {
    pub what: What,
    /// For [`What::Kernel`]: the kernel's name (default: the first kernel).
    pub kernel: Option<String>,
    /// A case-file node id to draw in red: the node itself in the graph; in the schedule, its
    /// buffer and the kernel that computes it.
    pub highlight: Option<u64>,
}

/// Why a picture cannot be drawn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DotError {
    #[error("{0}")]
    Load(String),
    #[error("{0}: cannot write ({1}); the file is unchanged")]
    Write(std::path::PathBuf, String),
    #[error("cannot write the picture: {0}")]
    Stdout(String),
    #[error("--highlight {0}: no such node in the case's graph")]
    NoSuchNode(u64),
    #[error("--highlight applies to --what graph and --what schedule, not to a kernel")]
    HighlightKernel,
    #[error("the compiler cannot schedule the case: {0}")]
    Schedule(String),
    #[error("the schedule has no kernels (only copies), so there is no kernel to draw")]
    NoKernels,
    #[error("--kernel {name}: no such kernel (the schedule has {})", known.join(", "))]
    UnknownKernel { name: String, known: Vec<String> },
    #[error("--format svg needs Graphviz's `dot` program, which is not installed (install graphviz, or use --format dot, which needs nothing)")]
    GraphvizMissing,
    #[error("graphviz `dot -Tsvg` failed: {0}")]
    Graphviz(String),
}

/// `uopkit dot FILE`: the picture of `file` in `format`, written atomically to `output`, or
/// to stdout. Every error names the file.
pub fn command(
    file: &std::path::Path,
    opts: &DotOpts,
    format: Format,
    output: Option<&std::path::Path>,
) -> Result<(), DotError> {
    let case = load::read_case(file).map_err(|e| DotError::Load(e.to_string()))?;
    let dot = case_dot(&case, opts).map_err(|e| match e {
        DotError::Load(m) => DotError::Load(format!("{}: {m}", file.display())),
        e => e,
    })?;
    let bytes = match format {
        Format::Dot => dot.into_bytes(),
        Format::Svg => to_svg(&dot)?,
    };
    match output {
        Some(path) => crate::atomic::write_atomic(path, &bytes)
            .map_err(|e| DotError::Write(path.to_path_buf(), e.to_string())),
        None => {
            let mut w = std::io::stdout().lock();
            w.write_all(&bytes)
                .and_then(|()| w.flush())
                .map_err(|e| DotError::Stdout(e.to_string()))
        }
    }
}

/// The DOT text of `opts.what` for `case`.
pub fn case_dot(case: &Case, opts: &DotOpts) -> Result<String, DotError> {
    let (loaded, verified) = load::load(case).map_err(|e| match e {
        LoadError::Case(c) => DotError::Load(c.to_string()),
        LoadError::Verify(v) => DotError::Load(format!("verifier: {v}")),
    })?;
    let highlight = match opts.highlight {
        Some(n) => Some(*loaded.arena_id.get(&n).ok_or(DotError::NoSuchNode(n))?),
        None => None,
    };
    if opts.what == What::Graph {
        return Ok(graph::graph_dot(&loaded, &verified, highlight));
    }
    if highlight.is_some() && opts.what == What::Kernel {
        return Err(DotError::HighlightKernel);
    }
    let roots: Vec<_> = case
        .outputs
        .iter()
        .map(|o| loaded.arena(o.node))
        .collect::<Result<_, _>>()
        .map_err(|e| DotError::Load(e.to_string()))?;
    let sched_opts =
        crate::backend::schedule_opts_for(case).map_err(|e| DotError::Schedule(e.to_string()))?;
    let sched =
        uopkit_compiler::pipeline::schedule_opts(&loaded.graph, &verified, &roots, &sched_opts)
            .map_err(|e| {
                DotError::Schedule(format!("node {}: {}", loaded.file_id_of(e.node), e.reason))
            })?;
    match opts.what {
        What::Schedule => Ok(schedule::schedule_dot(&sched, &loaded.file_id, highlight)),
        _ => {
            let programs = sched.programs();
            let program = match &opts.kernel {
                None => programs.first().ok_or(DotError::NoKernels)?,
                Some(name) => programs.iter().find(|p| &p.name == name).ok_or_else(|| {
                    DotError::UnknownKernel {
                        name: name.clone(),
                        known: if programs.is_empty() {
                            vec!["none".to_string()]
                        } else {
                            programs.iter().map(|p| p.name.clone()).collect()
                        },
                    }
                })?,
            };
            Ok(kernel::kernel_dot(program))
        }
    }
}

/// Renders DOT text to SVG with Graphviz's `dot -Tsvg`.
pub fn to_svg(dot: &str) -> Result<Vec<u8>, DotError> {
    use std::process::{Command, Stdio};
    let mut child = Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => DotError::GraphvizMissing,
            _ => DotError::Graphviz(format!("cannot start it: {e}")),
        })?;
    // Feed the input from a thread, so that a full output pipe never blocks the writer.
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| DotError::Graphviz("no input pipe".into()))?;
    let text = dot.as_bytes().to_vec();
    let feeder = std::thread::spawn(move || stdin.write_all(&text));
    let out = child
        .wait_with_output()
        .map_err(|e| DotError::Graphviz(e.to_string()))?;
    let fed = feeder
        .join()
        .map_err(|_| DotError::Graphviz("the input thread failed".into()))?;
    if !out.status.success() {
        return Err(DotError::Graphviz(format!(
            "{}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    fed.map_err(|e| DotError::Graphviz(format!("cannot write its input: {e}")))?;
    Ok(out.stdout)
}

/// A DOT double-quoted string: quotes and backslashes escaped, newlines as `\n` (a centred
/// line break), carriage returns dropped.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// An op's colour class (the module's table).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Class {
    Storage,
    Movement,
    Alu,
    Reduce,
    Copy,
    Effect,
    Loop,
    Other,
}

impl Class {
    pub fn of(op: Op) -> Class {
        match op {
            Op::BUFFER | Op::PARAM | Op::CONST => Class::Storage,
            Op::STORE | Op::AFTER => Class::Effect,
            Op::REDUCE => Class::Reduce,
            Op::COPY | Op::MSELECT | Op::MSTACK | Op::UNSHARD | Op::ALLREDUCE => Class::Copy,
            Op::RANGE | Op::END | Op::SPECIAL | Op::BARRIER | Op::INDEX | Op::LOAD => Class::Loop,
            Op::CAST | Op::BITCAST => Class::Alu,
            op if op.is_movement() => Class::Movement,
            op if op.is_alu() => Class::Alu,
            _ => Class::Other,
        }
    }

    pub fn fill(self) -> &'static str {
        match self {
            Class::Storage => "#cfe2f3",
            Class::Movement => "#d9ead3",
            Class::Alu => "#fff2cc",
            Class::Reduce => "#fce5cd",
            Class::Copy => "#d9d2e9",
            Class::Effect => "#d0d0d0",
            Class::Loop => "#d0e0e3",
            Class::Other => "#ffffff",
        }
    }
}

/// The attributes of a node: its label, shape and fill, red and bold when highlighted.
pub(crate) fn node_attrs(label: &str, shape: &str, fill: &str, highlight: bool) -> String {
    let label = quote(label);
    if highlight {
        format!("label={label}, shape={shape}, style=\"filled,bold\", fillcolor=\"{fill}\", color=\"red\", fontcolor=\"red\", penwidth=3")
    } else {
        format!("label={label}, shape={shape}, style=\"filled\", fillcolor=\"{fill}\"")
    }
}

/// Appends one line to `out` (writing to a String cannot fail).
pub(crate) fn line(out: &mut String, indent: usize, text: impl std::fmt::Display) {
    let _ = writeln!(out, "{:indent$}{text}", "");
}

/// A DOT identifier made of `s`: letters, digits and `_` kept, anything else as `_`.
pub(crate) fn ident(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_escapes_quotes_backslashes_and_newlines() {
        assert_eq!(quote("a\"b\\c\nd\r"), "\"a\\\"b\\\\c\\nd\"");
        assert_eq!(quote(""), "\"\"");
    }

    #[test]
    fn ident_keeps_it_a_bare_word() {
        assert_eq!(ident("CPU:0"), "CPU_0");
    }

    #[test]
    fn no_class_is_red() {
        for &op in Op::ALL {
            assert!(!Class::of(op).fill().contains("red"));
        }
    }
}
