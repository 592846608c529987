//! Worker mode: this process serves one in-process backend over `uopkit-backend/1` on its
//! stdin/stdout, so the harness can run compiled code away from the oracle: graph-level `run`
//! requests, and kernel-level `run_schedule` requests for a backend that runs kernel
//! programs as they are ([`Backend::run_schedule`]: `cpu`, for the kernel fuzzer's C variant;
//! any other backend answers `unsupported`).
//!
//! Any program that embeds the harness becomes a worker when [`WORKER_ENV`] names a backend
//! (`uopkit` itself, `tests/conformance.rs`, a user's test binary built on
//! `harness::libtest_main`): the harness re-executes its own binary with that variable set.
//!
//! After every case the worker compares the FP control state (MXCSR on x86-64, FPCR on
//! AArch64) with the one it started with; a case that changed it is answered as that
//! backend's failure and the worker asks to be replaced.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};

use serde_json::Value as Json;
use uopkit_compiler::runtime::fpenv;
use uopkit_interp::ir::DType;

use crate::backend::schedule_opts_with;
use crate::backends::{panic_message, Backend, BackendError, Job};
use crate::case::{Case, Compare, NanPolicy, Output, FORMAT};
use crate::load;
use crate::protocol::{
    self, Answer, Hello, Level, OutputBits, Request, ResultAnswer, RunRequest, VariantBits,
};

/// The environment variable that turns a harness binary into a worker for the named backend.
pub const WORKER_ENV: &str = "UOPKIT_WORKER_BACKEND";

/// How often a worker checks that the process that started it is still there.
const PARENT_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// Ends this process when its parent goes (it is then re-parented): a worker busy in a case
/// that never ends (a looping kernel) does not read stdin, so it would not see the harness
/// exit (a fail-fast stop, a crash, a kill on timeout) and would run on, orphaned. Unix only.
fn exit_with_parent() {
    #[cfg(unix)]
    {
        let parent = std::os::unix::process::parent_id();
        let watch = std::thread::Builder::new()
            .name("uopkit-worker-parent".into())
            .spawn(move || loop {
                std::thread::sleep(PARENT_POLL);
                if std::os::unix::process::parent_id() != parent {
                    eprintln!("uopkit worker: the process that started it (pid {parent}) is gone; exiting");
                    std::process::exit(3);
                }
            });
        if let Err(e) = watch {
            eprintln!("uopkit worker: cannot watch the parent process: {e}");
        }
    }
}

/// Serves `backend` until stdin closes, or until the process that started this one exits.
/// Returns the process exit code.
pub fn serve(backend: &dyn Backend) -> i32 {
    exit_with_parent();
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    let start_fp = fpenv::current();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { return 1 };
        if line.trim().is_empty() {
            continue;
        }
        let (answer, restart) = match serde_json::from_str::<Request>(&line) {
            Err(e) => (
                Answer::Error {
                    id: 0,
                    message: format!("worker: not a protocol request: {e}"),
                    restart: false,
                },
                false,
            ),
            Ok(Request::Hello { .. }) => (
                Answer::Hello(Hello {
                    protocol: protocol::PROTOCOL.into(),
                    name: backend.name().to_string(),
                    level: Level::Graph,
                    accepts: backend.accepts(),
                    allowances: backend.allowances(),
                    compile_only: backend.role() == crate::backends::Role::CompileOnly,
                    unavailable: backend.unavailable(),
                    kernel_cases: backend.kernel_cases(),
                }),
                false,
            ),
            Ok(Request::Run(req)) => {
                let result = catch_unwind(AssertUnwindSafe(|| run_request(backend, &req)));
                answer_of(backend, req.id, result, start_fp)
            }
            Ok(Request::RunSchedule(req)) => {
                let result = catch_unwind(AssertUnwindSafe(|| {
                    backend.run_schedule(&req).map(|buffers| ResultAnswer {
                        id: req.id,
                        outputs: None,
                        buffers: Some(buffers),
                        schedule: None,
                        variants: vec![],
                    })
                }));
                answer_of(backend, req.id, result, start_fp)
            }
        };
        if out
            .write_all(protocol::to_line(&answer).as_bytes())
            .and_then(|()| out.flush())
            .is_err()
        {
            return 1;
        }
        if restart {
            return 0;
        }
    }
    0
}

/// The answer to request `id` from what running it gave, and whether the worker must be
/// replaced after it (a panic, or a case that changed the FP control state from `start_fp`).
fn answer_of(
    backend: &dyn Backend,
    id: u64,
    result: std::thread::Result<Result<ResultAnswer, BackendError>>,
    start_fp: fpenv::FpState,
) -> (Answer, bool) {
    let tampered = fpenv::take_tampering().or_else(|| {
        let now = fpenv::current();
        (now != start_fp).then(|| {
            fpenv::set(start_fp);
            format!(
                "the case left the FP control state changed ({start_fp:?} -> {now:?}); restored"
            )
        })
    });
    match (result, tampered) {
        (_, Some(why)) => (
            Answer::Error {
                id,
                message: format!("{}: {why}", backend.name()),
                restart: true,
            },
            true,
        ),
        (Ok(Ok(r)), None) => (Answer::Result(r), false),
        (Ok(Err(BackendError::Unsupported(reason))), None) => {
            (Answer::Unsupported { id, reason }, false)
        }
        (Ok(Err(e)), None) => (
            Answer::Error {
                id,
                message: e.to_string(),
                restart: false,
            },
            false,
        ),
        (Err(p), None) => (
            Answer::Error {
                id,
                message: format!("{} panicked: {}", backend.name(), panic_message(p.as_ref())),
                restart: true,
            },
            true,
        ),
    }
}

/// Loads a graph-level request as a case (its node ids are the case-file ids) and runs it.
fn run_request(backend: &dyn Backend, req: &RunRequest) -> Result<ResultAnswer, BackendError> {
    let bad = |e: String| BackendError::Failed(format!("worker: request {}: {e}", req.id));
    let case = Case {
        format: FORMAT.into(),
        description: String::new(),
        tags: vec![],
        graph: req.graph.clone(),
        kernel: None,
        inputs: BTreeMap::new(),
        outputs: req
            .outputs
            .iter()
            .map(|o| Output {
                name: o.name.clone(),
                node: o.node,
                shape: o.shape.clone(),
                expect: Json::Array(vec![]),
                compare: Compare::Exact,
                nan: NanPolicy::Canonical,
            })
            .collect(),
        expect_error: None,
        schedule: None,
    };
    let (mut loaded, verified) = load::load(&case).map_err(|e| bad(e.to_string()))?;
    for inp in &req.inputs {
        let node = loaded.arena(inp.node).map_err(|e| bad(e.to_string()))?;
        let dtype: DType = inp
            .dtype
            .parse()
            .map_err(|_| bad(format!("unknown dtype {}", inp.dtype)))?;
        let comps = inp
            .components
            .iter()
            .map(|c| {
                c.iter()
                    .map(|b| protocol::parse_bits(dtype, b))
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(format!("input {}: {e}", inp.node)))?;
        loaded.inputs.insert(node, comps);
    }
    let outputs: Vec<(String, uopkit_interp::ir::NodeId)> = req
        .outputs
        .iter()
        .map(|o| loaded.arena(o.node).map(|n| (o.name.clone(), n)))
        .collect::<Result<_, _>>()
        .map_err(|e| bad(e.to_string()))?;
    let opts =
        schedule_opts_with(req.options.allreduce.as_deref()).map_err(|e| bad(e.to_string()))?;
    let job = Job {
        case: &req.case,
        graph: &loaded.graph,
        verified: &verified,
        inputs: &loaded.inputs,
        outputs: &outputs,
        file_id: &loaded.file_id,
        opts,
        allreduce: req.options.allreduce.clone(),
    };
    if let Some(why) = backend.skip_reason(&job) {
        return Err(BackendError::Unsupported(why));
    }
    let ran = backend.run(&job)?;
    let bits = |values: &[Option<uopkit_interp::eval::Value>]| -> Vec<OutputBits> {
        req.outputs
            .iter()
            .zip(values)
            .map(|(spec, v)| OutputBits {
                name: spec.name.clone(),
                components: v.as_ref().map(protocol::value_bits).unwrap_or_default(),
            })
            .collect()
    };
    let variants = ran
        .variants
        .iter()
        .map(|v| match &v.outputs {
            Ok(values) => VariantBits {
                label: v.label.clone(),
                outputs: Some(bits(values)),
                error: None,
            },
            Err(e) => VariantBits {
                label: v.label.clone(),
                outputs: None,
                error: Some(e.clone()),
            },
        })
        .collect();
    Ok(ResultAnswer {
        id: req.id,
        outputs: Some(bits(&ran.outputs)),
        buffers: None,
        schedule: ran.facts,
        variants,
    })
}
