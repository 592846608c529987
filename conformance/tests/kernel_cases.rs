//! Kernel-level cases: the oracle trial finds out-of-bounds accesses, uninitialized reads and
//! wrong expected values and names program, instruction and element; malformed bodies are
//! loader errors naming program, instruction and reason; `fmt`'s canonical text round-trips.

use uopkit_conformance::case::Case;
use uopkit_conformance::kernel_case;
use uopkit_conformance::load::parse_case;

/// out[i] = a[i] + 1 for i in 0..END over `size`-element buffers; `init` is a's contents.
fn case(end: u32, size: usize, init: &str, expect: &str, expect_error: Option<&str>) -> String {
    let err = expect_error
        .map(|e| format!(",\n  \"expect_error\": {e}"))
        .unwrap_or_default();
    format!(
        r#"{{
  "format": "uopkit-case/1",
  "description": "out[i] = a[i] + 1, hand-derived",
  "tags": ["kernel"],
  "kernel": {{
    "buffers": [
      {{"id": 0, "dtype": "float32", "size": {size}, "device": "CPU", "storage": 0, "init": null}},
      {{"id": 1, "dtype": "float32", "size": {size}, "device": "CPU", "storage": 1, "init": {init}}}
    ],
    "programs": [
      {{"name": "add1", "params": [{{"dtype": "float32", "size": {size}, "written": true}}, {{"dtype": "float32", "size": {size}, "written": false}}], "insts": [
          {{"op": "PARAM", "dtype": "float32", "arg": {{"param": 0}}}},
          {{"op": "PARAM", "dtype": "float32", "arg": {{"param": 1}}}},
          {{"op": "CONST", "dtype": "int32", "arg": {{"const": "{end:#x}"}}}},
          {{"op": "RANGE", "dtype": "int32", "src": [2], "arg": {{"axis": 0}}}},
          {{"op": "INDEX", "dtype": "float32", "src": [1, 3]}},
          {{"op": "LOAD", "dtype": "float32", "src": [4]}},
          {{"op": "CONST", "dtype": "float32", "arg": {{"const": "0x3f800000"}}}},
          {{"op": "ADD", "dtype": "float32", "src": [5, 6]}},
          {{"op": "INDEX", "dtype": "float32", "src": [0, 3]}},
          {{"op": "STORE", "dtype": "void", "src": [8, 7]}},
          {{"op": "END", "dtype": "void", "src": [3]}}
      ]}}
    ],
    "steps": [
      {{"kernel": {{"program": 0, "device": "CPU", "args": [0, 1]}}}}
    ],
    "expect": [
      {{"name": "out", "buffer": 0, "expect": {expect}, "nan": "canonical"}}
    ]
  }}{err}
}}
"#
    )
}

const A3: &str = r#"["0x3f800000", "0x40000000", "0x40400000"]"#;

fn judge(text: &str) -> Result<(), String> {
    let c: Case = parse_case(text).expect("the case parses");
    kernel_case::judge(&c, c.kernel.as_ref().expect("a kernel-level case"))
}

#[test]
fn a_correct_case_passes_and_round_trips_through_fmt() {
    let text = case(3, 3, A3, "[2.0, 3.0, 4.0]", None);
    judge(&text).expect("passes");
    let c = parse_case(&text).unwrap();
    assert_eq!(
        c.to_canonical_string(),
        text,
        "the canonical layout is the test's"
    );
    assert_eq!(parse_case(&c.to_canonical_string()).unwrap(), c);
}

#[test]
fn a_wrong_expected_value_names_buffer_and_element() {
    let e = judge(&case(3, 3, A3, "[2.0, 3.5, 4.0]", None)).unwrap_err();
    assert!(
        e.contains("out (buffer 0) element 1: expected 3.5, got 3"),
        "{e}"
    );
}

#[test]
fn an_out_of_bounds_read_names_program_instruction_and_element() {
    // a has 3 elements, the loop runs to 4: LOAD v5 reads a[3].
    let e = judge(&case(4, 3, A3, "[2.0, 3.0, 4.0]", None)).unwrap_err();
    assert!(e.contains("program 0 (add1)"), "{e}");
    assert!(e.contains("v5 (LOAD)"), "{e}");
    assert!(e.contains("out-of-bounds access"), "{e}");
    assert!(e.contains("element 3 of param slot 1"), "{e}");
    // …and a case that expects exactly that passes; a wrong instruction does not.
    let want = r#"{"kind": "ub", "ub": "out_of_bounds", "program": 0, "inst": 5, "element": 3}"#;
    judge(&case(4, 3, A3, "[2.0, 3.0, 4.0]", Some(want))).expect("the expected error");
    let wrong = r#"{"kind": "ub", "ub": "out_of_bounds", "program": 0, "inst": 9, "element": 3}"#;
    let e = judge(&case(4, 3, A3, "[2.0, 3.0, 4.0]", Some(wrong))).unwrap_err();
    assert!(e.contains("at instruction v9"), "{e}");
}

#[test]
fn an_uninitialized_element_reaching_the_output_is_named() {
    let init = r#"["0x3f800000", null, "0x40400000"]"#;
    let e = judge(&case(3, 3, init, "[2.0, 3.0, 4.0]", None)).unwrap_err();
    assert!(e.contains("element 1: expected 3.0, got poison"), "{e}");
    assert!(e.contains("element 1 of buffer 1 was never written"), "{e}");
    let want = r#"{"kind": "ub", "ub": "uninitialized_read", "element": 1}"#;
    judge(&case(3, 3, init, "[2.0, 3.0, 4.0]", Some(want))).expect("the expected error");
}

fn load_error(text: &str) -> String {
    let c = parse_case(text).expect("parses");
    kernel_case::load(c.kernel.as_ref().unwrap())
        .unwrap_err()
        .to_string()
}

#[test]
fn malformed_bodies_are_loader_errors_naming_program_and_instruction() {
    let good = case(3, 3, A3, "[2.0, 3.0, 4.0]", None);
    let cases = [
        (
            good.replace(r#""op": "ADD""#, r#""op": "FROB""#),
            "program 0 (add1): instruction v7: unknown op 'FROB'",
        ),
        (
            good.replace(r#""src": [5, 6]"#, r#""src": [5, 9]"#),
            "program 0 (add1): instruction v7: source v9 is not an earlier instruction",
        ),
        (
            good.replace(r#""src": [8, 7]"#, r#""src": [7, 7]"#),
            "program 0 (add1): instruction v9:",
        ),
        (
            good.replace(r#""args": [0, 1]"#, r#""args": [0]"#),
            "step 0: program 0 (add1) takes 2 buffer(s), the step passes 1",
        ),
        (
            good.replace("[2.0, 3.0, 4.0]", "[2.0, 3.0]"),
            "expect 0 (out): 2 expected elements, buffer 0 has 3",
        ),
        (
            good.replace(r#""0x40000000""#, r#""0x1040000000""#),
            "buffer 1: init element 1:",
        ),
    ];
    for (text, want) in cases {
        let e = load_error(&text);
        assert!(e.starts_with(want), "want {want:?}, got {e:?}");
    }
}

#[test]
fn graph_commands_refuse_a_kernel_level_case() {
    let c = parse_case(&case(3, 3, A3, "[2.0, 3.0, 4.0]", None)).unwrap();
    let e = uopkit_conformance::load::load(&c).err().expect("refused");
    assert!(
        e.to_string()
            .contains("kernel-level case has no tensor graph"),
        "{e}"
    );
}

/// Every exported tinygrad kernel case is in the canonical layout and passes on the oracle (the
/// kernel interpreter), except those `manifests/xfail.json` lists for the oracle, which fail.
#[test]
fn the_tinygrad_kernel_corpus_passes_on_the_oracle() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus");
    let dir = root.join("imported/tinygrad/kernels");
    let files = uopkit_conformance::corpus::case_files(&dir).expect("listable");
    assert!(files.len() >= 100, "only {} kernel cases", files.len());
    let xfail: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("../manifests/xfail.json")).unwrap(),
    )
    .unwrap();
    let listed: Vec<String> = xfail["expected_failures"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["backend"] == "oracle")
        .map(|e| e["case"].as_str().unwrap().to_string())
        .collect();
    let mut bad = vec![];
    for f in &files {
        let name = uopkit_conformance::corpus::case_name(&root, f);
        let text = std::fs::read_to_string(f).unwrap();
        let c = parse_case(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        if c.to_canonical_string() != text {
            bad.push(format!("{}: not canonical", f.display()));
        }
        let body = c.kernel.as_ref().expect("a kernel-level case");
        match (kernel_case::judge(&c, body), listed.contains(&name)) {
            (Err(e), false) => bad.push(format!("{name}: {e}")),
            (Ok(()), true) => bad.push(format!("{name}: listed in xfail.json but passes")),
            _ => {}
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} failed:\n{}",
        bad.len(),
        files.len(),
        bad.join("\n")
    );
}

#[test]
fn sizes_are_checked_before_anything_is_allocated() {
    // One buffer over the per-buffer limit (the same 2^28 elements as a tensor value), and
    // two that are each allowed but over the limit together: loader errors, no allocation.
    let huge = case(3, 3, A3, "[2.0, 3.0, 4.0]", None).replacen(
        r#""size": 3, "device": "CPU", "storage": 0"#,
        r#""size": 100000000000, "device": "CPU", "storage": 0"#,
        1,
    );
    let e = load_error(&huge);
    assert!(
        e.starts_with("buffer 0: size 100000000000 is over the limit of 268435456 elements"),
        "{e}"
    );
    let both = case(3, 3, A3, "[2.0, 3.0, 4.0]", None).replacen(
        r#""size": 3, "device": "CPU", "storage": 0"#,
        r#""size": 268435456, "device": "CPU", "storage": 0"#,
        1,
    );
    let e = load_error(&both);
    assert!(e.contains("more than 268435456 elements in all"), "{e}");
}

#[test]
fn a_kernel_case_carrying_tensor_parts_or_tensor_error_fields_is_invalid() {
    let good = case(3, 3, A3, "[2.0, 3.0, 4.0]", None);
    let with_graph = good.replacen(
        r#""tags": ["kernel"],"#,
        r#""tags": ["kernel"], "graph": [{"id": 0, "op": "CONST", "dtype": "int32", "arg": 1}],"#,
        1,
    );
    let e = judge(&with_graph).expect_err("refused");
    assert!(e.contains("a kernel-level case has no 'graph'"), "{e}");
    let contains = case(
        5,
        3,
        A3,
        "[]",
        Some(r#"{"kind": "ub", "ub": "out_of_bounds", "contains": "anything"}"#),
    );
    let e = judge(&contains).expect_err("refused");
    assert!(
        e.contains("'node' and 'contains' are for tensor-level cases"),
        "{e}"
    );
    let inst_only = case(
        5,
        3,
        A3,
        "[]",
        Some(r#"{"kind": "ub", "ub": "out_of_bounds", "inst": 5}"#),
    );
    let e = judge(&inst_only).expect_err("refused");
    assert!(e.contains("'inst' needs the 'program'"), "{e}");
}

/// A backend's answer to a kernel-level case (what `cpu` or a kernel-level external returns
/// for the case's `run_schedule` request) is judged against the kernel interpreter: the right
/// bits pass, a wrong element is reported with its index and both values, and an answer
/// missing the buffer or with the wrong length is a reported failure, never a panic.
#[test]
fn a_backend_answer_is_judged_against_the_kernel_interpreter() {
    use uopkit_conformance::protocol::{Bits, BufferBits};
    let text = case(3, 3, A3, "[2.0, 3.0, 4.0]", None);
    let c: Case = parse_case(&text).expect("the case parses");
    let body = c.kernel.as_ref().expect("a kernel-level case");
    let kc = kernel_case::load(body).expect("the body loads");
    let req = kernel_case::request("kernel/add1", body, &kc);
    assert_eq!(req.case, "kernel/add1");
    assert_eq!(req.read, vec![0], "the request reads the expected buffer");
    assert_eq!(req.programs.len(), 1);
    let answer = |bits: &[u64]| {
        vec![BufferBits {
            id: 0,
            data: bits.iter().map(|&b| Bits::Hex(b)).collect(),
        }]
    };
    // 2.0, 3.0, 4.0
    let right = [0x4000_0000, 0x4040_0000, 0x4080_0000];
    assert_eq!(
        kernel_case::compare_answer(&kc, &answer(&right)),
        Ok(Ok(()))
    );
    let mut wrong = right;
    wrong[1] = 0x4040_0001;
    let report = kernel_case::compare_answer(&kc, &answer(&wrong))
        .expect("the interpreter runs")
        .expect_err("one element differs");
    assert!(report.contains("element 1"), "{report}");
    assert!(report.contains("kernel interpreter"), "{report}");
    let short = kernel_case::compare_answer(&kc, &answer(&right[..2]))
        .expect("the interpreter runs")
        .expect_err("two elements for three");
    assert!(short.contains("2 element(s), expected 3"), "{short}");
    let none = kernel_case::compare_answer(&kc, &[])
        .expect("the interpreter runs")
        .expect_err("no buffer");
    assert!(none.contains("no buffer 0"), "{none}");
}
