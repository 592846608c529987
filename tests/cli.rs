//! The CLI on bad input: every malformed case gets a message naming the file, the node and
//! the reason, and exit code 2 — never a panic. And on good input: exit 0 with the outputs.

use std::path::PathBuf;
use std::process::Command;

fn uopkit(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_uopkit"))
        .args(args)
        .output()
        .expect("the uopkit binary runs");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

fn case_file(dir: &tempfile::TempDir, name: &str, body: &str) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, body).expect("write the case");
    p
}

/// A case around a graph given as JSON text.
fn with_graph(graph: &str, inputs: &str, outputs: &str) -> String {
    format!(
        r#"{{"format": "uopkit-case/1", "description": "bad input test", "tags": [], "graph": {graph}, "inputs": {inputs}, "outputs": {outputs}}}"#
    )
}

const BUF: &str = r#"{"id": 0, "op": "BUFFER", "dtype": "int32", "arg": {"slot": 0, "size": 4, "device": "CPU"}}"#;

/// Runs `uopkit run` on the case and checks: exit 2, the file name, the node and the reason.
fn rejects(name: &str, body: &str, node: Option<u64>, reason: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = case_file(&dir, name, body);
    let (code, text) = uopkit(&["run", file.to_str().expect("utf-8 path")]);
    assert_eq!(code, 2, "{name}: expected exit 2, got {code}:\n{text}");
    assert!(
        text.contains(name),
        "{name}: message does not name the file:\n{text}"
    );
    if let Some(n) = node {
        assert!(
            text.contains(&format!("node {n}")) && !text.contains(&format!("%{n}")),
            "{name}: message does not name node {n}:\n{text}"
        );
    }
    assert!(
        text.contains(reason),
        "{name}: message does not say '{reason}':\n{text}"
    );
    assert!(!text.contains("panicked"), "{name}: panic:\n{text}");
}

#[test]
fn malformed_json() {
    rejects(
        "malformed.json",
        "{\"format\": \"uopkit-case/1\", \"graph\": [",
        None,
        "malformed case",
    );
}

#[test]
fn unknown_op() {
    let g = format!(r#"[{BUF}, {{"id": 1, "op": "FROBNICATE", "dtype": "int32", "src": [0]}}]"#);
    rejects(
        "unknown_op.json",
        &with_graph(&g, "{}", "[]"),
        None,
        "unknown op 'FROBNICATE'",
    );
}

#[test]
fn unknown_dtype() {
    let g = r#"[{"id": 0, "op": "BUFFER", "dtype": "float128", "arg": {"slot": 0, "size": 4, "device": "CPU"}}]"#;
    rejects(
        "unknown_dtype.json",
        &with_graph(g, "{}", "[]"),
        None,
        "unknown dtype 'float128'",
    );
}

#[test]
fn dangling_source() {
    let g = format!(r#"[{BUF}, {{"id": 1, "op": "NEG", "dtype": "int32", "src": [7]}}]"#);
    rejects(
        "dangling.json",
        &with_graph(&g, "{}", "[]"),
        Some(1),
        "source 7 is not a node",
    );
}

#[test]
fn cycle() {
    let g = r#"[{"id": 0, "op": "NEG", "dtype": "int32", "src": [1]}, {"id": 1, "op": "NEG", "dtype": "int32", "src": [0]}]"#;
    rejects("cycle.json", &with_graph(g, "{}", "[]"), None, "cycle");
}

#[test]
fn shape_mismatch() {
    let g = format!(
        r#"[{BUF}, {{"id": 1, "op": "RESHAPE", "dtype": "int32", "src": [0], "arg": [2, 2]}}, {{"id": 2, "op": "ADD", "dtype": "int32", "src": [0, 1]}}]"#
    );
    rejects(
        "shape_mismatch.json",
        &with_graph(&g, "{}", "[]"),
        Some(2),
        "operand shapes differ",
    );
}

#[test]
fn dtype_mismatch() {
    let g = format!(
        r#"[{BUF}, {{"id": 1, "op": "CAST", "dtype": "float32", "src": [0]}}, {{"id": 2, "op": "ADD", "dtype": "int32", "src": [0, 1]}}]"#
    );
    rejects(
        "dtype_mismatch.json",
        &with_graph(&g, "{}", "[]"),
        Some(2),
        "operand dtypes differ",
    );
}

#[test]
fn absurd_size_is_refused_before_allocation() {
    let g = r#"[{"id": 0, "op": "BUFFER", "dtype": "float32", "arg": {"slot": 0, "size": 1000000000000000, "device": "CPU"}}]"#;
    rejects(
        "absurd_size.json",
        &with_graph(g, r#"{"0": {"fill": 0}}"#, "[]"),
        Some(0),
        "over the limit",
    );
}

#[test]
fn absurd_expand_is_refused() {
    let g = format!(
        r#"[{BUF}, {{"id": 1, "op": "EXPAND", "dtype": "int32", "src": [0], "arg": [1000000, 1000000]}}]"#
    );
    rejects(
        "absurd_expand.json",
        &with_graph(&g, "{}", "[]"),
        Some(1),
        "more than",
    );
}

#[test]
fn bad_permutation() {
    let g = format!(
        r#"[{BUF}, {{"id": 1, "op": "RESHAPE", "dtype": "int32", "src": [0], "arg": [2, 2]}}, {{"id": 2, "op": "PERMUTE", "dtype": "int32", "src": [1], "arg": [0, 0]}}]"#
    );
    rejects(
        "bad_permute.json",
        &with_graph(&g, "{}", "[]"),
        Some(2),
        "not a permutation",
    );
}

#[test]
fn bad_input_literal() {
    rejects(
        "bad_literal.json",
        &with_graph(
            &format!("[{BUF}]"),
            r#"{"0": {"data": [1, 2, 3, 3000000000]}}"#,
            "[]",
        ),
        Some(0),
        "element 3",
    );
}

#[test]
fn output_names_a_missing_node() {
    let out = r#"[{"name": "x", "node": 9, "shape": [4], "expect": [0, 0, 0, 0]}]"#;
    rejects(
        "missing_output.json",
        &with_graph(&format!("[{BUF}]"), r#"{"0": {"fill": 0}}"#, out),
        Some(9),
        "no such node",
    );
}

#[test]
fn wrong_device_for_alu() {
    let g = r#"[{"id": 0, "op": "BUFFER", "dtype": "int32", "arg": {"slot": 0, "size": 4, "device": "CPU:0"}},
                {"id": 1, "op": "BUFFER", "dtype": "int32", "arg": {"slot": 1, "size": 4, "device": "CPU:1"}},
                {"id": 2, "op": "ADD", "dtype": "int32", "src": [0, 1]}]"#;
    rejects(
        "device_mismatch.json",
        &with_graph(g, "{}", "[]"),
        Some(2),
        "different devices",
    );
}

#[test]
fn good_case_prints_outputs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let g = format!(r#"[{BUF}, {{"id": 1, "op": "ADD", "dtype": "int32", "src": [0, 0]}}]"#);
    let out = r#"[{"name": "twice", "node": 1, "shape": [4], "expect": [2, 4, 6, -8]}]"#;
    let file = case_file(
        &dir,
        "good.json",
        &with_graph(&g, r#"{"0": {"data": [1, 2, 3, -4]}}"#, out),
    );
    let (code, text) = uopkit(&["run", file.to_str().expect("utf-8 path")]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("twice: int32 [4] = [2, 4, 6, -8]"), "{text}");
}

#[test]
fn wrong_expectation_exits_1() {
    let dir = tempfile::tempdir().expect("temp dir");
    let g = format!(r#"[{BUF}, {{"id": 1, "op": "ADD", "dtype": "int32", "src": [0, 0]}}]"#);
    let out = r#"[{"name": "twice", "node": 1, "shape": [4], "expect": [2, 4, 6, 8]}]"#;
    let file = case_file(
        &dir,
        "wrong.json",
        &with_graph(&g, r#"{"0": {"data": [1, 2, 3, -4]}}"#, out),
    );
    let (code, text) = uopkit(&["run", file.to_str().expect("utf-8 path")]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("1 of 4 elements differ"), "{text}");
    assert!(
        text.contains("[3]: expected 8 (0x00000008), got -8 (0xfffffff8)"),
        "{text}"
    );
}

#[test]
fn check_reports_a_missing_corpus_as_bad_input() {
    let (code, text) = uopkit(&["check", "--corpus", "/nonexistent/corpus"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("/nonexistent/corpus"), "{text}");
}

#[test]
fn schema_is_json() {
    let (code, text) = uopkit(&["schema"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&text).expect("schema is JSON");
    assert_eq!(v["properties"]["format"]["const"], "uopkit-case/1");
}

/// A deep chain (thousands of nodes) neither overflows a stack nor takes long: the oracle
/// and the CPU backend both handle it.
#[test]
fn deep_graph_checks_on_oracle_and_cpu() {
    let dir = tempfile::tempdir().expect("temp dir");
    let depth = 3000u64;
    let mut nodes = vec![
        BUF.to_string(),
        r#"{"id": 1, "op": "CONST", "dtype": "int32", "arg": 1}"#.to_string(),
    ];
    let mut prev = 0;
    for i in 0..depth {
        let id = i + 2;
        nodes.push(format!(
            r#"{{"id": {id}, "op": "ADD", "dtype": "int32", "src": [{prev}, 1]}}"#
        ));
        prev = id;
    }
    let out = format!(
        r#"[{{"name": "x", "node": {prev}, "shape": [4], "expect": [3000, 3001, 3002, 3003]}}]"#
    );
    let g = format!("[{}]", nodes.join(", "));
    case_file(
        &dir,
        "deep.json",
        &with_graph(&g, r#"{"0": {"data": [0, 1, 2, 3]}}"#, &out),
    );
    let (code, text) = uopkit(&[
        "check",
        "--corpus",
        dir.path().to_str().expect("utf-8 path"),
    ]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("oracle: 1 passed") && text.contains("cpu: 1 passed"),
        "{text}"
    );
}

#[test]
fn two_case_buffers_that_are_one_node_are_rejected() {
    let g = format!(
        r#"[{BUF}, {{"id": 1, "op": "BUFFER", "dtype": "int32", "arg": {{"slot": 0, "size": 4, "device": "CPU"}}}}]"#
    );
    rejects(
        "dup_buffer.json",
        &with_graph(&g, r#"{"0": {"fill": 1}, "1": {"fill": 2}}"#, "[]"),
        Some(1),
        "same node as node 0",
    );
}

#[test]
fn an_output_must_have_a_value_and_the_right_shape() {
    let g = format!(r#"[{BUF}, {{"id": 1, "op": "STORE", "dtype": "void", "src": [0, 0]}}]"#);
    let out = r#"[{"name": "s", "node": 1, "shape": [], "expect": []}]"#;
    rejects(
        "void_output.json",
        &with_graph(&g, r#"{"0": {"fill": 1}}"#, out),
        Some(1),
        "has no value",
    );
    let out = r#"[{"name": "b", "node": 0, "shape": [2, 2], "expect": [1, 1, 1, 1]}]"#;
    rejects(
        "wrong_shape.json",
        &with_graph(&format!("[{BUF}]"), r#"{"0": {"fill": 1}}"#, out),
        Some(0),
        "the node has shape [4]",
    );
    let out = r#"[{"name": "b", "node": 0, "shape": [4], "expect": [1, 1, 1]}]"#;
    rejects(
        "short_expect.json",
        &with_graph(&format!("[{BUF}]"), r#"{"0": {"fill": 1}}"#, out),
        Some(0),
        "expect has 3 elements",
    );
}

#[test]
fn absurd_reduce_orders_and_empty_expands_are_handled() {
    let g = format!(
        r#"[{BUF}, {{"id": 1, "op": "REDUCE", "dtype": "int32", "src": [0], "arg": ["ADD", 1, {{"split": 1000000000000000000}}]}}]"#
    );
    rejects(
        "huge_split.json",
        &with_graph(&g, r#"{"0": {"fill": 1}}"#, "[]"),
        Some(1),
        "needs 1..=1024 parts",
    );
    // A 0-element value expanded enormously is still 0 elements, evaluated at once.
    let dir = tempfile::tempdir().expect("temp dir");
    let g = r#"[{"id": 0, "op": "BUFFER", "dtype": "int32", "arg": {"slot": 0, "size": 0, "device": "CPU"}},
                {"id": 1, "op": "EXPAND", "dtype": "int32", "src": [0], "arg": [1099511627776, 8388608]}]"#;
    let out = r#"[{"name": "e", "node": 1, "shape": [1099511627776, 8388608, 0], "expect": []}]"#;
    let file = case_file(&dir, "empty_expand.json", &with_graph(g, "{}", out));
    let (code, text) = uopkit(&["run", file.to_str().expect("utf-8 path")]);
    assert_eq!(code, 0, "{text}");
}

#[test]
fn uninit_false_is_rejected() {
    rejects(
        "uninit_false.json",
        &with_graph(&format!("[{BUF}]"), r#"{"0": {"uninit": false}}"#, "[]"),
        Some(0),
        "says nothing",
    );
}

/// `compile --lang cuda` prints the GPU-style kernels and their CUDA text: the integer sum
/// reduces in local memory over threadIdx.x with barriers; `--c` keeps printing plain C
/// loops (no launch indices).
#[test]
fn compile_prints_cuda_for_the_gpu_target() {
    let case = concat!(env!("CARGO_MANIFEST_DIR"), "/corpus/reduce/add_2d_all.json");
    let (code, text) = uopkit(&["compile", case, "--lang", "cuda"]);
    assert_eq!(code, 0, "{text}");
    for want in [
        "SPECIAL",
        "lidx0",
        "BARRIER",
        "__global__",
        "threadIdx.x",
        "__syncthreads();",
        "__shared__",
    ] {
        assert!(text.contains(want), "no '{want}' in:\n{text}");
    }
    let (code, text) = uopkit(&["compile", case, "--c"]);
    assert_eq!(code, 0, "{text}");
    assert!(
        !text.contains("SPECIAL") && !text.contains("threadIdx"),
        "{text}"
    );
    assert!(text.contains("void k_k0(void **args)"), "{text}");
    let (code, text) = uopkit(&["compile", case, "--lang", "fortran"]);
    assert_eq!(code, 2, "{text}");
}

/// `uopkit compile x | head` is not a crash: a reader that stops reading ends the run quietly
/// with the shell's status for it (141), never "uopkit crashed" or a panic message.
#[test]
fn a_closed_stdout_is_not_a_crash() {
    use std::process::Stdio;
    // A pipe whose reading end is closed before uopkit starts: its first write fails.
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_uopkit"))
        .args([
            "compile",
            "corpus/reduce/add_float32_declared_split.json",
            "--c",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("uopkit runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "stderr: {stderr}");
    assert!(
        !stderr.contains("crashed") && !stderr.contains("panicked"),
        "{stderr}"
    );
}

/// `uopkit compile` names graph nodes in its schedule listing by the case file's ids.
#[test]
fn compile_lists_graph_buffers_by_case_file_id() {
    let dir = tempfile::tempdir().expect("temp dir");
    let case = case_file(
        &dir,
        "renumbered.json",
        r#"{"format": "uopkit-case/1", "description": "x + x, ids from 40; hand-derived",
            "graph": [
              {"id": 40, "op": "BUFFER", "dtype": "int32", "arg": {"device": "CPU:0", "size": 2, "slot": 0}},
              {"id": 41, "op": "ADD", "dtype": "int32", "src": [40, 40]}],
            "inputs": {"40": {"data": [1, 2]}},
            "outputs": [{"name": "y", "node": 41, "shape": [2], "expect": [2, 4]}]}"#,
    );
    let (code, text) = uopkit(&["compile", case.to_str().expect("utf-8 path")]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("(graph node 40, storage"), "{text}");
    assert!(!text.contains("graph %"), "{text}");
}

/// `uopkit compile` shows the memory plan: intermediates whose lifetimes (first write to last
/// read, in step order) do not overlap share a storage, and one read while another is written
/// does not. In this case's schedule (by hand from its step list): b1 is written at step 0
/// and last read at step 1, b7 written at step 5 and read at step 6, b9 written later still;
/// b0 is written at step 1, while b1 is still read.
#[test]
fn compile_shares_storage_between_intermediates_that_are_never_live_together() {
    let case = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/corpus/compiler/declared_chunks_of_split_float32.json"
    );
    let (code, text) = uopkit(&["compile", case]);
    assert_eq!(code, 0, "{text}");
    let storage = |b: &str| -> String {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{b}: ")))
            .unwrap_or_else(|| panic!("no buffer {b} in:\n{text}"));
        assert!(line.contains("(intermediate, storage s"), "{line}");
        line.rsplit("storage ")
            .next()
            .unwrap_or("")
            .trim_end_matches(')')
            .to_string()
    };
    assert!(text.contains("0: kernel k0 on CPU:0 (b1(w), b2)"), "{text}");
    assert!(text.contains("1: kernel k1 on CPU:0 (b0(w), b1)"), "{text}");
    assert!(text.contains("6: kernel k6 on CPU:0 (b6(w), b7)"), "{text}");
    assert_eq!(storage("b1"), storage("b7"), "{text}");
    assert_eq!(storage("b1"), storage("b9"), "{text}");
    assert_ne!(storage("b0"), storage("b1"), "{text}");
}

/// A worker whose parent is gone exits, even with its stdin still open (as it is while a
/// worker is busy in a case that never ends and the harness stops). A shell starts
/// `uopkit worker` in the background reading a FIFO this test keeps open, and waits; once the
/// worker has answered a hello (so it runs, with the shell as its parent), the shell is told
/// to exit. The worker must then be gone within seconds, not wait on the FIFO forever.
#[cfg(target_os = "linux")]
#[test]
fn a_worker_exits_when_the_process_that_started_it_is_gone() {
    use std::io::{BufRead, Write};
    use std::process::Stdio;
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("requests");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    // Read and write: opening does not wait for a reader, and the FIFO never reports EOF
    // while this handle lives.
    let mut requests = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .expect("the FIFO");
    let mut sh = Command::new("sh")
        .arg("-c")
        .arg("\"$0\" worker --backend cpu <\"$1\" 2>/dev/null & echo $!; read -r _")
        .arg(env!("CARGO_BIN_EXE_uopkit"))
        .arg(&fifo)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sh");
    let mut out = std::io::BufReader::new(sh.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("the worker's pid");
    let pid: u32 = line.trim().parse().expect("a pid");
    writeln!(
        requests,
        r#"{{"type": "hello", "protocol": "uopkit-backend/1"}}"#
    )
    .expect("hello");
    line.clear();
    out.read_line(&mut line).expect("the worker's hello");
    assert!(line.contains("\"hello\""), "{line}");
    // The shell exits; the worker is re-parented.
    drop(sh.stdin.take());
    let _ = sh.wait();
    // Running: /proc has it and it is not a zombie (state Z, exited but not yet reaped).
    let alive = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| {
            st.rsplit_once(')')
                .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
        })
    };
    let start = std::time::Instant::now();
    while alive(pid) && start.elapsed() < std::time::Duration::from_secs(20) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let gone = !alive(pid);
    if !gone {
        let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
    }
    assert!(gone, "worker {pid} still runs 20 s after its parent exited");
    drop(requests);
}
