//! `runtime::threads::cpu_threads` reads `UOPKIT_CPU_THREADS` once per process: a change of
//! the variable after the first call does not reach later launches (and a later bad value is
//! not an error). One test in its own binary, so that setting the variable races no other
//! test's reads of the environment.

use uopkit_compiler::runtime::threads::{cpu_threads, THREADS_VAR};

#[test]
fn the_thread_count_is_read_once() {
    std::env::set_var(THREADS_VAR, "3");
    assert_eq!(cpu_threads().expect("3 is a number of threads"), 3);
    std::env::set_var(THREADS_VAR, "5");
    assert_eq!(cpu_threads().expect("still the first value"), 3);
    std::env::set_var(THREADS_VAR, "not a number");
    assert_eq!(cpu_threads().expect("the bad value is never read"), 3);
    std::env::remove_var(THREADS_VAR);
    assert_eq!(cpu_threads().expect("unset later: still 3"), 3);
}
