//! GPU benchmark for `scripts/gpu-check.sh`: the compiler's own CUDA kernels for an
//! elementwise `x*2+1` and a float32 sum (declared `split(256)`, so the GPU lowering folds it
//! on 256 work items in the order the oracle replays), timed against the device's own
//! device-to-device copy, as ratios.
//!
//! `cargo run --release --example gpu_bench -- [ELEMENTS] [REPS]` (default 2^26 float32
//! elements, 20 repetitions after one warm-up). Without a CUDA device it says why and exits 0.
//! Bandwidth counts bytes read plus bytes written; each figure is the mean over REPS of
//! launch-to-completion (every `launch` waits for its kernel).

use std::process::ExitCode;
use std::time::Instant;

use serde_json::json;
use uopkit_compiler::pipeline;
use uopkit_compiler::render::{self, Lang};
use uopkit_compiler::runtime::{self, Buffer, Device};
use uopkit_compiler::schedule::ScheduleOpts;
use uopkit_conformance::case::Case;
use uopkit_conformance::load;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(1 << 26);
    let reps: u32 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(20);
    let dev = match runtime::open("CUDA:0") {
        Ok(d) => d,
        Err(e) => {
            println!("gpu_bench: skipped: {e}");
            return ExitCode::SUCCESS;
        }
    };
    match run(dev.as_ref(), n, reps.max(1)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpu_bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(dev: &dyn Device, n: usize, reps: u32) -> Result<(), String> {
    let bytes = n.checked_mul(4).ok_or("size overflows")?;
    println!(
        "gpu_bench on {dev:?}: {n} float32 elements ({} MB), {reps} reps",
        bytes >> 20
    );
    let a = dev.alloc(bytes).map_err(|e| e.to_string())?;
    let b = dev.alloc(bytes).map_err(|e| e.to_string())?;
    dev.copy_in(&a, &vec![0x3f; bytes])
        .map_err(|e| e.to_string())?;
    let copy = time(reps, || {
        dev.copy_to(&a, dev, &b).map_err(|e| e.to_string())?;
        dev.synchronize().map_err(|e| e.to_string())
    })?;
    let copy_bw = 2.0 * bytes as f64 / copy;
    println!(
        "device-to-device copy: {:.3} ms, {:.1} GB/s (read + write)",
        copy * 1e3,
        copy_bw / 1e9
    );

    let buf = json!({"id": 0, "op": "BUFFER", "dtype": "float32", "arg": {"device": "CUDA:0", "size": n, "slot": 0}});
    let elementwise = vec![
        buf.clone(),
        json!({"id": 1, "op": "CONST", "dtype": "float32", "arg": "2.0"}),
        json!({"id": 2, "op": "MUL", "dtype": "float32", "src": [0, 1]}),
        json!({"id": 3, "op": "CONST", "dtype": "float32", "arg": "1.0"}),
        json!({"id": 4, "op": "ADD", "dtype": "float32", "src": [2, 3]}),
    ];
    let t = kernel_time(dev, elementwise, 4, reps)?;
    let bw = 2.0 * bytes as f64 / t;
    println!(
        "elementwise x*2+1: {:.3} ms, {:.1} GB/s, {:.2} of the copy bandwidth (target >= 0.8)",
        t * 1e3,
        bw / 1e9,
        bw / copy_bw
    );

    let sum = vec![
        buf,
        json!({"id": 1, "op": "REDUCE", "dtype": "float32", "src": [0], "arg": ["ADD", 1, {"split": 256}]}),
    ];
    let t = kernel_time(dev, sum, 1, reps)?;
    let bw = bytes as f64 / t;
    println!(
        "sum (split 256): {:.3} ms, {:.1} GB/s read, {:.2} of the copy bandwidth",
        t * 1e3,
        bw / 1e9,
        bw / copy_bw
    );
    Ok(())
}

/// Mean seconds of `f` over `reps` runs after one warm-up.
fn time(reps: u32, mut f: impl FnMut() -> Result<(), String>) -> Result<f64, String> {
    f()?;
    let t0 = Instant::now();
    for _ in 0..reps {
        f()?;
    }
    Ok(t0.elapsed().as_secs_f64() / f64::from(reps))
}

/// Compiles the graph's kernels for `dev` and times the launches of all of them.
fn kernel_time(
    dev: &dyn Device,
    graph: Vec<serde_json::Value>,
    root: u64,
    reps: u32,
) -> Result<f64, String> {
    let case: Case = serde_json::from_value(json!({
        "format": "uopkit-case/1", "description": "gpu_bench", "graph": graph, "outputs": []
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
    let unit = render::renderer(Lang::Cuda)
        .render(&sched.programs())
        .map_err(|e| e.to_string())?;
    let prog = dev.compile(&unit).map_err(|e| e.to_string())?;
    let mut launches: Vec<(String, Vec<Buffer>)> = vec![];
    for k in &unit.kernels {
        println!(
            "  kernel {}: grid {:?}, block {:?}",
            k.name, k.launch.grid, k.launch.block
        );
        let bufs = k
            .params
            .iter()
            .map(|p| dev.alloc(p.size.saturating_mul(p.dtype.itemsize())))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
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
