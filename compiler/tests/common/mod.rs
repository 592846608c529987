//! Checks every runtime's `Device` must pass, shared by the runtime tests.

use uopkit_compiler::runtime::{Buffer, Compiled, Device, Error};

/// The launch refusals of the `Device` contract, for a compiled `prog` of `d1` whose kernel
/// `add` takes two 32-byte buffers `a`, `b` of `d1`: too few buffers, a buffer too small, a
/// buffer of another device `d0`, the program launched on `d0`, an unknown kernel. Each is
/// refused before anything runs.
pub fn launch_refusals(d0: &dyn Device, d1: &dyn Device, prog: &Compiled, a: &Buffer, b: &Buffer) {
    assert!(matches!(
        d1.launch(prog, "add", &[a]),
        Err(Error::ArgCount { .. })
    ));
    let small = d1.alloc(16).expect("small");
    assert!(matches!(
        d1.launch(prog, "add", &[a, &small]),
        Err(Error::BufferTooSmall { .. })
    ));
    let on_d0 = d0.alloc(32).expect("a buffer of the other device");
    assert!(matches!(
        d1.launch(prog, "add", &[a, &on_d0]),
        Err(Error::WrongDevice { .. })
    ));
    assert!(matches!(
        d0.launch(prog, "add", &[&on_d0, &on_d0]),
        Err(Error::Unsupported(_))
    ));
    assert!(matches!(
        d1.launch(prog, "nope", &[a, b]),
        Err(Error::UnknownKernel(_))
    ));
}
