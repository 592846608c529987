//! The compiler's stages import in one direction. Every `crate::<module>` path (and every
//! `super::<module>` that climbs to the crate root) in `compiler/src/**/*.rs` is an edge
//! between top-level modules; each must point to an earlier stage of [`STAGES`], every
//! top-level module must be listed there, and the graph has no circle. The same order is
//! drawn in ARCHITECTURE.md ("Stages").
//!
//! `UOPKIT_STAGE_SRC=<dir>` checks another source tree (to measure an old revision).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The declared stage order: a module may import only modules listed before it. `scoped`
/// (closure-scoped thread-local settings) and `rewrite` are libraries that several stages
/// use; `kgraph` is the kernel-graph type that lower, optimize and linearize share.
const STAGES: &[&str] = &[
    "scoped",
    "rewrite",
    "spec",
    "schedule",
    "kgraph",
    "lower",
    "optimize",
    "linearize",
    "render",
    "runtime",
    "exec",
    "pipeline",
];

type Graph = BTreeMap<String, BTreeSet<String>>;

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The text without `//` comments (doc comments name modules they do not import); string
/// literals are kept so that a `//` inside one is not taken for a comment.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b: Vec<char> = text.chars().collect();
    let (mut i, mut in_str) = (0, false);
    while i < b.len() {
        let c = b[i];
        if in_str {
            out.push(c);
            if c == '\\' && i + 1 < b.len() {
                out.push(b[i + 1]);
                i += 1;
            } else if c == '"' {
                in_str = false;
            }
        } else if c == '\'' && i + 2 < b.len() && b[i + 2] == '\'' {
            // A char literal such as '"'.
            out.extend(&b[i..i + 3]);
            i += 2;
        } else if c == '"' {
            in_str = true;
            out.push(c);
        } else if c == '/' && b.get(i + 1) == Some(&'/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
            continue;
        } else {
            out.push(c);
        }
        i += 1;
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn ident_at(s: &str) -> &str {
    let end = s.find(|c: char| !is_ident(c)).unwrap_or(s.len());
    &s[..end]
}

/// The modules named right after each occurrence of `prefix` (`crate::x`, `crate::{x, y::z}`).
fn named_after(text: &str, prefix: &str) -> Vec<String> {
    let mut out = vec![];
    let mut from = 0;
    while let Some(k) = text[from..].find(prefix) {
        let at = from + k;
        from = at + prefix.len();
        if text[..at].chars().next_back().is_some_and(is_ident) {
            continue;
        }
        let rest = text[from..].trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level names of the group: after `{` and after each `,` at depth 0.
            let mut depth = 0;
            let mut start = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if start && is_ident(c) => {
                        out.push(ident_at(&group[j..]).to_string());
                        start = false;
                    }
                    c if !c.is_whitespace() => start = false,
                    _ => {}
                }
            }
        } else {
            out.push(ident_at(rest).to_string());
        }
    }
    out
}

/// Edges between top-level modules of the crate whose source is `src`.
fn import_graph(src: &Path) -> (Graph, BTreeSet<String>) {
    let mut files = vec![];
    rs_files(src, &mut files);
    let mut modules = BTreeSet::new();
    let mut graph = Graph::new();
    for f in &files {
        let rel: Vec<String> = f
            .strip_prefix(src)
            .expect("under src")
            .with_extension("")
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect();
        if rel == ["lib"] || rel == ["main"] {
            continue;
        }
        let top = rel[0].clone();
        modules.insert(top.clone());
        // The module path of the file (`a/mod.rs` is module `a`).
        let depth = if rel.last().is_some_and(|l| l == "mod") {
            rel.len() - 1
        } else {
            rel.len()
        };
        let text = strip_comments(&std::fs::read_to_string(f).expect("readable"));
        let mut targets = named_after(&text, "crate::");
        // `super::` repeated `depth` times is the crate root.
        let root = "super::".repeat(depth);
        targets.extend(named_after(&text, &root));
        for t in targets {
            if t != top && !t.is_empty() {
                graph.entry(top.clone()).or_default().insert(t);
            }
        }
    }
    // Only edges to modules of the crate (`super::super::Item` may name an item).
    for targets in graph.values_mut() {
        targets.retain(|t| modules.contains(t));
    }
    graph.retain(|_, t| !t.is_empty());
    (graph, modules)
}

/// Edges that go to a later (or unlisted) stage, and modules missing from the order.
fn order_violations(graph: &Graph, modules: &BTreeSet<String>, stages: &[&str]) -> Vec<String> {
    let pos = |m: &str| stages.iter().position(|s| *s == m);
    let mut bad = vec![];
    for m in modules {
        if pos(m).is_none() {
            bad.push(format!("module '{m}' is not in the stage order"));
        }
    }
    for (from, tos) in graph {
        for to in tos {
            if let (Some(a), Some(b)) = (pos(from), pos(to)) {
                if b >= a {
                    bad.push(format!(
                        "'{from}' imports '{to}', a later stage (order: {})",
                        stages.join(" → ")
                    ));
                }
            }
        }
    }
    bad
}

/// Every circle of the graph, each once, as `a → b → … → a`.
fn circles(graph: &Graph) -> Vec<String> {
    fn walk(
        g: &Graph,
        start: &str,
        at: &str,
        path: &mut Vec<String>,
        found: &mut BTreeSet<Vec<String>>,
    ) {
        for next in g.get(at).into_iter().flatten() {
            if next == start {
                let mut c = path.clone();
                // Canonical rotation: the smallest name first.
                let k = (0..c.len()).min_by_key(|&i| &c[i]).unwrap_or(0);
                c.rotate_left(k);
                found.insert(c);
            } else if !path.contains(next) && next.as_str() > start {
                path.push(next.clone());
                walk(g, start, next, path, found);
                path.pop();
            }
        }
    }
    let mut found = BTreeSet::new();
    for m in graph.keys() {
        walk(graph, m, m, &mut vec![m.clone()], &mut found);
    }
    found
        .into_iter()
        .map(|c| format!("{} → {}", c.join(" → "), c[0]))
        .collect()
}

fn render(graph: &Graph) -> String {
    graph
        .iter()
        .map(|(f, t)| {
            format!(
                "  {f} → {}\n",
                t.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        })
        .collect()
}

#[test]
fn stages_import_in_one_direction() {
    let src = std::env::var_os("UOPKIT_STAGE_SRC")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let (graph, modules) = import_graph(&src);
    eprintln!("import graph of {}:\n{}", src.display(), render(&graph));
    // The parser sees the imports that certainly exist.
    if std::env::var_os("UOPKIT_STAGE_SRC").is_none() {
        for (a, b) in [
            ("lower", "spec"),
            ("exec", "runtime"),
            ("pipeline", "lower"),
        ] {
            assert!(
                graph.get(a).is_some_and(|t| t.contains(b)),
                "the parser missed {a} → {b}:\n{}",
                render(&graph)
            );
        }
    }
    let circles = circles(&graph);
    eprintln!("{} import circle(s)", circles.len());
    let bad = order_violations(&graph, &modules, STAGES);
    assert!(
        circles.is_empty() && bad.is_empty(),
        "import circles:\n{}\nstage order violations:\n{}\ngraph:\n{}",
        circles.join("\n"),
        bad.join("\n"),
        render(&graph)
    );
}

/// ARCHITECTURE.md lists the same order (its "Stages" section).
#[test]
fn architecture_md_lists_the_same_order() {
    let md =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../ARCHITECTURE.md"))
            .expect("ARCHITECTURE.md is readable");
    let flat = md.split_whitespace().collect::<Vec<_>>().join(" ");
    let want = STAGES.join(", ");
    assert!(
        flat.contains(&want),
        "ARCHITECTURE.md does not list the stage order '{want}'"
    );
}

#[test]
fn a_backward_import_and_a_circle_are_caught() {
    let text = "use crate::render::c;\nuse crate::{spec::BufId, exec};\n// crate::pipeline\nfn f() { super::super::schedule::x(); }";
    let stripped = strip_comments(text);
    assert_eq!(
        named_after(&stripped, "crate::"),
        ["render", "spec", "exec"],
        "{stripped}"
    );
    assert_eq!(named_after(&stripped, "super::super::"), ["schedule"]);
    let mut g = Graph::new();
    g.entry("render".into())
        .or_default()
        .insert("runtime".into());
    g.entry("runtime".into())
        .or_default()
        .insert("render".into());
    let modules: BTreeSet<String> = ["render", "runtime"].map(String::from).into();
    assert_eq!(circles(&g), ["render → runtime → render"]);
    assert_eq!(
        order_violations(&g, &modules, STAGES).len(),
        1,
        "render → runtime goes to a later stage"
    );
    let unknown: BTreeSet<String> = ["render", "codegen"].map(String::from).into();
    assert!(order_violations(&Graph::new(), &unknown, STAGES)[0].contains("codegen"));
}
