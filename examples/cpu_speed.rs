//! A small CPU timing script for the C backend's fast paths (not the bench tool): the
//! compiler's own C kernels for an elementwise `x*2+1`, a float32 sum (sequential, and
//! declared `split(8)`) and a 256² float32 matmul, run on `CPU:0`.
//!
//! `cargo run --release --example cpu_speed -- [ELEMENTS] [REPS]` (default 2^24, 10 reps).
//! `CPU_SPEED_EAGER=1` renders without `defer_nan` and compiles without `restrict` (how the
//! renderer worked before those passes), for a before/after comparison. Figures are noisy on
//! a shared machine.

use std::process::ExitCode;
use std::time::Instant;

use serde_json::{json, Value};
use uopkit_compiler::pipeline;
use uopkit_compiler::render::{CStyle, Renderer};
use uopkit_compiler::runtime::{self, Buffer, Device};
use uopkit_compiler::schedule::ScheduleOpts;
use uopkit_conformance::case::Case;
use uopkit_conformance::load;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(1 << 24);
    let reps: u32 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10);
    match run(n, reps.max(1)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cpu_speed: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(n: usize, reps: u32) -> Result<(), String> {
    let dev = runtime::open("CPU:0").map_err(|e| e.to_string())?;
    let eager = std::env::var_os("CPU_SPEED_EAGER").is_some();
    println!("cpu_speed: {n} float32 elements, {reps} reps, eager={eager}");
    let bytes = (n * 4) as f64;
    let buf = |slot: u64, size: usize| json!({"id": slot, "op": "BUFFER", "dtype": "float32", "arg": {"device": "CPU:0", "size": size, "slot": slot}});
    let ew = vec![
        buf(0, n),
        json!({"id": 1, "op": "CONST", "dtype": "float32", "arg": "2.0"}),
        json!({"id": 2, "op": "MUL", "dtype": "float32", "src": [0, 1]}),
        json!({"id": 3, "op": "CONST", "dtype": "float32", "arg": "1.0"}),
        json!({"id": 4, "op": "ADD", "dtype": "float32", "src": [2, 3]}),
    ];
    let t = kernel_time(dev.as_ref(), ew, 4, reps, eager)?;
    println!(
        "elementwise x*2+1: {:.2} ms, {:.2} GB/s (read + write)",
        t * 1e3,
        2.0 * bytes / t / 1e9
    );
    for order in [json!("sequential"), json!({"split": 8})] {
        let g = vec![
            buf(0, n),
            json!({"id": 1, "op": "REDUCE", "dtype": "float32", "src": [0], "arg": ["ADD", 1, order]}),
        ];
        let t = kernel_time(dev.as_ref(), g, 1, reps, eager)?;
        println!(
            "sum {order}: {:.2} ms, {:.2} GB/s read",
            t * 1e3,
            bytes / t / 1e9
        );
    }
    let m = 256usize;
    let mm = vec![
        buf(0, m * m),
        buf(1, m * m),
        json!({"id": 2, "op": "RESHAPE", "dtype": "float32", "src": [0], "arg": [m, m]}),
        json!({"id": 3, "op": "EXPAND", "dtype": "float32", "src": [2], "arg": [m]}),
        json!({"id": 4, "op": "PERMUTE", "dtype": "float32", "src": [3], "arg": [2, 1, 0]}),
        json!({"id": 5, "op": "RESHAPE", "dtype": "float32", "src": [1], "arg": [m, m]}),
        json!({"id": 6, "op": "EXPAND", "dtype": "float32", "src": [5], "arg": [m]}),
        json!({"id": 7, "op": "PERMUTE", "dtype": "float32", "src": [6], "arg": [1, 0, 2]}),
        json!({"id": 8, "op": "MUL", "dtype": "float32", "src": [4, 7]}),
        json!({"id": 9, "op": "REDUCE", "dtype": "float32", "src": [8], "arg": ["ADD", 1]}),
    ];
    let t = kernel_time(dev.as_ref(), mm, 9, reps, eager)?;
    println!(
        "matmul {m}x{m}: {:.2} ms, {:.2} GFLOP/s",
        t * 1e3,
        2.0 * (m * m * m) as f64 / t / 1e9
    );
    Ok(())
}

fn time(reps: u32, mut f: impl FnMut() -> Result<(), String>) -> Result<f64, String> {
    f()?;
    let t0 = Instant::now();
    for _ in 0..reps {
        f()?;
    }
    Ok(t0.elapsed().as_secs_f64() / f64::from(reps))
}

fn kernel_time(
    dev: &dyn Device,
    graph: Vec<Value>,
    root: u64,
    reps: u32,
    eager: bool,
) -> Result<f64, String> {
    let case: Case = serde_json::from_value(json!({
        "format": "uopkit-case/1", "description": "cpu_speed", "graph": graph, "outputs": []
    }))
    .map_err(|e| e.to_string())?;
    let (loaded, verified) = load::load(&case).map_err(|e| e.to_string())?;
    let roots = [loaded.arena(root).map_err(|e| e.to_string())?];
    let sched = pipeline::schedule_with_opts(
        &loaded.graph,
        &verified,
        &roots,
        &pipeline::default_passes(),
        &ScheduleOpts::default(),
    )
    .map_err(|e| format!("node {}: {}", e.node, e.reason))?;
    let style = if eager {
        CStyle::C_EAGER_NAN
    } else {
        CStyle::C
    };
    let mut unit = style.render(&sched.programs()).map_err(|e| e.to_string())?;
    if eager {
        unit.source = format!("{}{}", runtime::cpu::NO_RESTRICT, unit.source);
    }
    if std::env::var_os("CPU_SPEED_SHOW").is_some() {
        let body = unit.source.split("end of prelude").nth(1).unwrap_or("");
        println!("{body}");
    }
    let prog = dev.compile(&unit).map_err(|e| e.to_string())?;
    let mut launches: Vec<(String, Vec<Buffer>)> = vec![];
    for k in &unit.kernels {
        let bufs = k
            .params
            .iter()
            .map(|p| dev.alloc(p.size.saturating_mul(p.dtype.itemsize())))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        for b in &bufs {
            dev.copy_in(b, &vec![0x3f; b.bytes()])
                .map_err(|e| e.to_string())?;
        }
        launches.push((k.name.clone(), bufs));
    }
    time(reps, || {
        for (name, bufs) in &launches {
            let args: Vec<&Buffer> = bufs.iter().collect();
            dev.launch(&prog, name, &args).map_err(|e| e.to_string())?;
        }
        dev.synchronize().map_err(|e| e.to_string())
    })
}
