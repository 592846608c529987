//! The compact oracle path (`load::load_compact`, `run::run_oracle_compact`,
//! `compare::compare_compact`, `run::write_output`) gives what the public path gives, on every
//! corpus case: the same values, the same errors, the same comparison, the same judgement.

use std::path::Path;

use uopkit_conformance::load::{self, read_case};
use uopkit_conformance::run::{self, RunError};
use uopkit_conformance::{compare, corpus, inputs};
use uopkit_interp::eval::{Column, Elem};

#[test]
fn compact_path_agrees_with_the_public_path_on_the_corpus() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus");
    let files = corpus::case_files(&dir).expect("corpus");
    assert!(files.len() > 50, "the corpus has cases");
    let (mut ran, mut failed) = (0, 0);
    for f in &files {
        let Ok(case) = read_case(f) else { continue };
        let name = f.display();
        // Loading: the same errors; inputs that are the same elements.
        match (load::load(&case), load::load_compact(&case)) {
            (Ok((l, _)), Ok((lc, _, cols))) => {
                assert!(lc.inputs.is_empty(), "{name}");
                assert_eq!(l.inputs.len(), cols.len(), "{name}");
                for ((id, init), (idc, comps)) in l.inputs.iter().zip(&cols) {
                    assert_eq!(id, idc, "{name}");
                    assert_eq!(init.len(), comps.len(), "{name}");
                    for (c, col) in init.iter().zip(comps) {
                        let want: Vec<Elem> = c
                            .iter()
                            .enumerate()
                            .map(|(i, e)| {
                                e.map_or(
                                    Elem::Uninit {
                                        buffer: *id,
                                        index: i,
                                    },
                                    Elem::Bits,
                                )
                            })
                            .collect();
                        assert_eq!(col.to_elems(), want, "{name}");
                    }
                }
            }
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{name}"),
            (a, b) => panic!(
                "{name}: load {:?} vs load_compact {:?}",
                a.is_ok(),
                b.is_ok()
            ),
        }
        let (public, compact) = (run::run_oracle(&case), run::run_oracle_compact(&case));
        match (&public, &compact) {
            (Ok(p), Ok(c)) => {
                ran += 1;
                let pv = run::output_values(&case, p).expect("outputs");
                let cv = run::output_compacts(&case, c).expect("outputs");
                for ((out, pv), cv) in case.outputs.iter().zip(pv).zip(cv) {
                    assert_eq!(&cv.to_value(), pv, "{name}: output {}", out.name);
                    assert_eq!(
                        format!("{:?}", compare::compare(out, pv)),
                        format!("{:?}", compare::compare_compact(out, cv)),
                        "{name}: output {}",
                        out.name
                    );
                    let mut text = vec![];
                    run::write_output(&mut text, &out.name, cv).expect("writes");
                    assert!(text.starts_with(out.name.as_bytes()), "{name}");
                }
            }
            (Err(a), Err(b)) => {
                failed += 1;
                assert_eq!(a.to_string(), b.to_string(), "{name}");
                assert_eq!(
                    matches!(a, RunError::Load(_)),
                    matches!(b, RunError::Load(_)),
                    "{name}"
                );
            }
            (a, b) => panic!(
                "{name}: run_oracle {:?} vs run_oracle_compact {:?}",
                a.is_ok(),
                b.is_ok()
            ),
        }
        assert_eq!(
            run::judge_oracle(&case, &public),
            run::judge_oracle(&case, &compact),
            "{name}"
        );
    }
    assert!(ran > 50 && failed > 0, "ran {ran}, failed {failed}");
}

#[test]
fn write_output_prints_elements_and_unwritten_ones() {
    let init = uopkit_conformance::case::Init::Data(vec![
        serde_json::json!(1.5),
        serde_json::json!("-0.0"),
    ]);
    let col = inputs::column(
        &init,
        uopkit_interp::ir::DType::Float32,
        2,
        uopkit_interp::ir::NodeId(0),
    )
    .expect("column");
    let v = uopkit_interp::eval::Compact {
        dtype: uopkit_interp::ir::DType::Float32,
        shape: vec![2],
        multi: false,
        comps: vec![std::rc::Rc::new(col)],
    };
    let mut text = vec![];
    run::write_output(&mut text, "o", &v).expect("writes");
    assert_eq!(
        String::from_utf8(text).expect("utf-8"),
        "o: float32 [2] = [1.5, -0.0]\n"
    );
    let u = uopkit_interp::eval::Compact {
        multi: true,
        comps: vec![
            std::rc::Rc::new(Column::uninit(v.dtype, uopkit_interp::ir::NodeId(3), 1)),
            v.comps[0].clone(),
        ],
        ..v.clone()
    };
    let mut text = vec![];
    run::write_output(&mut text, "m", &u).expect("writes");
    assert_eq!(
        String::from_utf8(text).expect("utf-8"),
        "m: float32 [2] on 2 devices\n  device 0: [?]\n  device 1: [1.5, -0.0]\n"
    );
}
