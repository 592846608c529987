//! Where the time of `uopkit run FILE` goes, phase by phase (the oracle path only). Make the
//! case files with `scripts/gen_big_cases.py`, then
//! `cargo run --release -p uopkit-conformance --example case_bench -- FILE`
//! (docs/oracle-memory.md, "Figures").

use std::path::PathBuf;
use std::time::Instant;

use uopkit_conformance::{load, run};

fn main() {
    let Some(path) = std::env::args().nth(1).map(PathBuf::from) else {
        eprintln!("usage: case_bench FILE");
        std::process::exit(2);
    };
    // On a big stack, like the CLI.
    let h = std::thread::Builder::new()
        .stack_size(512 << 20)
        .spawn(move || bench(&path))
        .expect("thread");
    if h.join().is_err() {
        std::process::exit(101);
    }
}

fn bench(path: &std::path::Path) {
    let t0 = Instant::now();
    let case = match load::read_case(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let t1 = Instant::now();
    let (loaded, verified) = match load::load(&case) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let t2 = Instant::now();
    let nodes = loaded.graph.len();
    drop((loaded, verified));
    let t3 = Instant::now();
    let result = run::run_oracle(&case);
    let t4 = Instant::now();
    let judged = run::judge_oracle(&case, &result);
    let t5 = Instant::now();
    drop(result);
    drop(case);
    let t6 = Instant::now();
    let s = |a: Instant, b: Instant| (b - a).as_secs_f64();
    println!(
        "{}: nodes {nodes} read+parse {:.3}s load(build+verify+inputs) {:.3}s run_oracle(load+evaluate) {:.3}s judge {:.3}s drop {:.3}s ({})",
        path.display(),
        s(t0, t1),
        s(t1, t2),
        s(t3, t4),
        s(t4, t5),
        s(t2, t3) + s(t5, t6),
        if judged.is_ok() { "as expected" } else { "NOT as expected" }
    );
}
