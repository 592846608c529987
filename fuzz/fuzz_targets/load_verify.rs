//! Fuzzes the loader and the verifier (and the oracle on small accepted graphs): any input
//! must give a value or an error, never a panic or an abort. See docs/robustness.md.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uopkit_conformance::load::{self, parse_case};
use uopkit_conformance::run::run_oracle;

/// Accepted graphs with at most this many elements (all values together) are evaluated.
const ORACLE_ELEMENTS: usize = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(case) = parse_case(text) else {
        return;
    };
    let Ok((loaded, verified)) = load::load(&case) else {
        return;
    };
    let total = loaded
        .graph
        .ids()
        .map(|id| {
            let info = verified.info(id);
            let copies = info.device.as_ref().map_or(1, |d| d.devices().len());
            info.numel().saturating_mul(copies)
        })
        .fold(0usize, usize::saturating_add);
    if total <= ORACLE_ELEMENTS {
        let _ = run_oracle(&case);
    }
});
