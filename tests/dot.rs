//! `uopkit dot`: pictures of a case's graph, schedule and kernels as Graphviz DOT (or SVG),
//! through the built binary.

use std::path::PathBuf;
use std::process::Command;

fn uopkit_env(args: &[&str], path_env: Option<&str>) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_uopkit"));
    cmd.args(args);
    if let Some(p) = path_env {
        cmd.env("PATH", p);
    }
    let out = cmd.output().expect("the uopkit binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn uopkit(args: &[&str]) -> (i32, String, String) {
    uopkit_env(args, None)
}

fn repo(path: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(path)
        .to_string_lossy()
        .into_owned()
}

const SEED: &str = "corpus/seeds/cross_device_assign_is_copy_CPU1_to_CPU0.json";
const REDUCE: &str = "corpus/reduce/add_2d_axis1.json";

/// BUFFER 0, BUFFER 1, ADD 2 = 0 + 1, NEG 3 = -2.
fn small_case(dir: &tempfile::TempDir) -> String {
    let body = r#"{"format": "uopkit-case/1", "description": "dot test", "tags": [], "graph": [
      {"id": 0, "op": "BUFFER", "dtype": "int32", "arg": {"slot": 0, "size": 4, "device": "CPU"}},
      {"id": 1, "op": "BUFFER", "dtype": "int32", "arg": {"slot": 1, "size": 4, "device": "CPU"}},
      {"id": 2, "op": "ADD", "dtype": "int32", "src": [0, 1]},
      {"id": 3, "op": "NEG", "dtype": "int32", "src": [2]}],
      "inputs": {"0": {"data": [1, 2, 3, 4]}, "1": {"data": [1, 1, 1, 1]}},
      "outputs": [{"name": "y", "node": 3, "shape": [4], "expect": [-2, -3, -4, -5]}]}"#;
    let p = dir.path().join("small.json");
    std::fs::write(&p, body).expect("write the case");
    p.to_string_lossy().into_owned()
}

/// The lines that declare a node (`name [label=…];`) whose name starts with `prefix`.
fn node_lines<'a>(dot: &'a str, prefix: &str) -> Vec<&'a str> {
    dot.lines()
        .map(str::trim)
        .filter(|l| {
            l.strip_prefix(prefix).is_some_and(|rest| {
                let digits = rest.chars().take_while(char::is_ascii_digit).count();
                digits > 0 && rest[digits..].starts_with(" [label=")
            })
        })
        .collect()
}

#[test]
fn graph_has_one_node_per_uop_and_edges_in_source_order() {
    let dir = tempfile::tempdir().expect("temp dir");
    let case = small_case(&dir);
    let (code, dot, err) = uopkit(&["dot", &case]);
    assert_eq!(code, 0, "{err}");
    assert!(dot.starts_with("digraph "), "{dot}");
    let nodes = node_lines(&dot, "n");
    assert_eq!(nodes.len(), 4, "{dot}");
    assert!(nodes[2].contains(r#""2: ADD\nint32 [4]\nCPU:0""#), "{dot}");
    assert!(nodes[0].contains("BUFFER"), "{dot}");
    let edges: Vec<&str> = dot
        .lines()
        .map(str::trim)
        .filter(|l| l.contains(" -> "))
        .collect();
    assert_eq!(
        edges,
        [
            r#"n0 -> n2 [label="0"];"#,
            r#"n1 -> n2 [label="1"];"#,
            "n2 -> n3;"
        ],
        "{dot}"
    );
    assert!(!dot.contains("red"), "nothing is highlighted:\n{dot}");
}

#[test]
fn highlight_colours_exactly_that_node() {
    let dir = tempfile::tempdir().expect("temp dir");
    let case = small_case(&dir);
    let (code, dot, err) = uopkit(&["dot", &case, "--highlight", "2"]);
    assert_eq!(code, 0, "{err}");
    let red: Vec<&str> = dot.lines().filter(|l| l.contains("red")).collect();
    assert_eq!(red.len(), 1, "{dot}");
    assert!(
        red[0].contains("2: ADD") && red[0].contains("bold"),
        "{dot}"
    );
}

#[test]
fn schedule_of_cross_device_assign_copies_into_the_cpu0_graph_buffer() {
    let (code, dot, err) = uopkit(&["dot", &repo(SEED), "--what", "schedule"]);
    assert_eq!(code, 0, "{err}");
    // Which cluster each declared node is in.
    let mut cluster = None;
    let mut in_cluster = std::collections::BTreeMap::new();
    for l in dot.lines().map(str::trim) {
        if let Some(c) = l.strip_prefix("subgraph cluster_") {
            cluster = Some(c.trim_end_matches(" {").to_string());
        } else if l == "}" {
            cluster = None;
        } else if let (Some(c), Some((name, _))) = (&cluster, l.split_once(" [label=")) {
            in_cluster.insert(name.to_string(), (c.clone(), l.to_string()));
        }
    }
    let clusters: std::collections::BTreeSet<&str> =
        in_cluster.values().map(|(c, _)| c.as_str()).collect();
    assert_eq!(
        clusters.into_iter().collect::<Vec<_>>(),
        ["CPU_0", "CPU_1"],
        "{dot}"
    );
    let graph_buf = in_cluster
        .iter()
        .find(|(_, (_, l))| l.contains(r"graph node 0\n"))
        .map(|(n, (c, _))| (n.clone(), c.clone()))
        .expect("a buffer for graph node 0");
    assert_eq!(graph_buf.1, "CPU_0", "{dot}");
    let copy = in_cluster
        .iter()
        .find(|(_, (_, l))| l.contains("COPY"))
        .map(|(n, (c, _))| (n.clone(), c.clone()))
        .expect("a COPY step");
    assert_eq!(
        copy.1, "CPU_0",
        "the COPY sits on its destination's device:\n{dot}"
    );
    assert!(
        dot.contains(&format!("  {} -> {};\n", copy.0, graph_buf.0)),
        "no COPY edge into the CPU:0 graph buffer:\n{dot}"
    );
    assert!(
        !dot.contains("kernel"),
        "the seed schedules no kernel:\n{dot}"
    );
}

#[test]
fn kernel_has_a_node_per_instruction() {
    let (code, listing, err) = uopkit(&["compile", &repo(REDUCE)]);
    assert_eq!(code, 0, "{err}");
    // The first kernel's listing: instruction lines `vN = …` until the next kernel.
    let first: Vec<&str> = listing
        .split("kernel ")
        .filter(|k| k.contains(" = "))
        .take(1)
        .flat_map(|k| k.lines())
        .filter(|l| l.trim_start().starts_with('v') && l.contains(" = "))
        .collect();
    assert!(!first.is_empty(), "{listing}");
    let (code, dot, err) = uopkit(&["dot", &repo(REDUCE), "--what", "kernel"]);
    assert_eq!(code, 0, "{err}");
    let nodes = node_lines(&dot, "v");
    assert_eq!(nodes.len(), first.len(), "{dot}\n{listing}");
    for (i, n) in nodes.iter().enumerate() {
        assert!(n.starts_with(&format!("v{i} [label=\"v{i} = ")), "{n}");
    }
    assert!(dot.contains("subgraph cluster_loop_v"), "{dot}");
    assert!(dot.contains(" -> v"), "{dot}");
    let (code, named, _) = uopkit(&["dot", &repo(REDUCE), "--what", "kernel", "--kernel", "k0"]);
    assert_eq!((code, named.as_str()), (0, dot.as_str()));
}

#[test]
fn output_is_byte_identical_across_runs() {
    for what in ["graph", "schedule", "kernel"] {
        let args = ["dot", &repo(REDUCE), "--what", what];
        let (c1, a, _) = uopkit(&args);
        let (c2, b, _) = uopkit(&args);
        assert_eq!((c1, c2), (0, 0), "{what}");
        assert_eq!(a, b, "{what}");
    }
}

#[test]
fn output_file_is_written() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("graph.dot");
    let out_s = out.to_string_lossy().into_owned();
    let (code, stdout, err) = uopkit(&["dot", &repo(REDUCE), "--output", &out_s]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.is_empty(), "{stdout}");
    let (_, want, _) = uopkit(&["dot", &repo(REDUCE)]);
    assert_eq!(std::fs::read_to_string(&out).expect("written"), want);
}

#[test]
fn bad_input_exits_2_with_a_message() {
    let cases: [(&[&str], &str); 5] = [
        (
            &["dot", &repo(REDUCE), "--highlight", "99"],
            "--highlight 99: no such node",
        ),
        (
            &["dot", &repo(REDUCE), "--what", "kernel", "--kernel", "nope"],
            "--kernel nope: no such kernel (the schedule has k0",
        ),
        (&["dot", &repo(SEED), "--what", "kernel"], "no kernels"),
        (
            &["dot", "/nonexistent/case.json"],
            "/nonexistent/case.json: cannot read",
        ),
        (
            &["dot", &repo(REDUCE), "--what", "kernel", "--highlight", "1"],
            "--highlight applies",
        ),
    ];
    for (args, msg) in cases {
        let (code, out, err) = uopkit(args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains(msg), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

fn graphviz_installed() -> bool {
    Command::new("dot")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn svg_through_graphviz_or_a_clear_message() {
    let args = [
        "dot",
        &repo(REDUCE),
        "--what",
        "schedule",
        "--format",
        "svg",
    ];
    if graphviz_installed() {
        let (code, svg, err) = uopkit(&args);
        assert_eq!(code, 0, "{err}");
        assert!(svg.contains("<svg"), "{svg}");
    } else {
        eprintln!("graphviz is not installed: checking only the message");
    }
    // Without graphviz on the PATH: exit 2, and the way out.
    let (code, out, err) = uopkit_env(&args, Some(""));
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("not installed") && err.contains("--format dot"),
        "{err}"
    );
}
