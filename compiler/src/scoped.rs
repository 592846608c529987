//! Thread-local settings that hold for one closure's extent: what a test or a backend variant
//! forces (tile widths, chunk counts, the streaming threshold) without touching the process
//! environment, so concurrent trials on other threads are unaffected.

use std::cell::Cell;
use std::thread::LocalKey;

/// Runs `f` with `key` set to `value` on this thread; the previous value is back when `f`
/// returns or unwinds.
pub fn with_cell<T: Copy + 'static, R>(
    key: &'static LocalKey<Cell<T>>,
    value: T,
    f: impl FnOnce() -> R,
) -> R {
    struct Restore<T: Copy + 'static> {
        key: &'static LocalKey<Cell<T>>,
        old: T,
    }
    impl<T: Copy + 'static> Drop for Restore<T> {
        fn drop(&mut self) {
            self.key.with(|c| c.set(self.old));
        }
    }
    let _restore = Restore {
        key,
        old: key.with(|c| c.replace(value)),
    };
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        static SETTING: Cell<Option<u32>> = const { Cell::new(None) };
    }

    #[test]
    fn the_setting_holds_inside_only_and_is_restored_after_an_unwind() {
        assert_eq!(SETTING.with(Cell::get), None);
        with_cell(&SETTING, Some(3), || {
            assert_eq!(SETTING.with(Cell::get), Some(3));
            with_cell(&SETTING, Some(5), || {
                assert_eq!(SETTING.with(Cell::get), Some(5))
            });
            assert_eq!(SETTING.with(Cell::get), Some(3));
        });
        assert_eq!(SETTING.with(Cell::get), None);
        let unwound = std::panic::catch_unwind(|| {
            with_cell(&SETTING, Some(7), || panic!("unwinds"));
        });
        assert!(unwound.is_err());
        assert_eq!(SETTING.with(Cell::get), None);
        // Another thread never sees this thread's setting.
        with_cell(&SETTING, Some(9), || {
            let other = std::thread::spawn(|| SETTING.with(Cell::get)).join();
            assert_eq!(other.ok(), Some(None));
        });
    }
}
