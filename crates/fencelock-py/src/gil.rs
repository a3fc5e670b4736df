//! Native code and the GIL while the interpreter may be ending: which threads may take the GIL
//! (or run Python code) with fencelock's frames on their stack, and what the others do instead.
//! `process.rs` sets the end; `operation.rs` and `logging.rs` ask before they go in.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

/// Set at the interpreter's exit, after the background work was waited for: from then on,
/// nothing calls into Python, and a thread other than the one ending the interpreter that would
/// take the GIL back from fencelock's native code parks instead (see [`detach`]).
static SHUTTING_DOWN: AtomicBool = AtomicBool::new(false);

/// The threads other than the answering one that may take the GIL (or run Python code) with
/// fencelock's native frames on their stack: between a look at [`SHUTTING_DOWN`] and the end
/// of their [`Inside`]. The exit waits for none to be left before the interpreter finalizes.
static INSIDE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Whether this thread runs the interpreter's exit (`_shutdown`): the one thread that
    /// finalizes it, which CPython never ends, and which must never park.
    static ENDING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// **The interpreter's end.** While CPython finalizes, a thread other than the finalizing one
/// that takes the GIL (back from a blocking call, or to go on running Python code it let other
/// threads run) is ended at once by `pthread_exit`: a forced unwind of its stack, which aborts
/// the process (`FATAL: exception not rethrown`) if it crosses a Rust frame. So no thread
/// takes the GIL with fencelock's frames on its stack once the exit has begun: it parks, for
/// good (the process is ending; nothing waits for that thread). The exit (`_shutdown`, from
/// `atexit`, which CPython runs before it finalizes) sets [`SHUTTING_DOWN`], then waits, with
/// the GIL released, until the threads already [`Inside`] are out; any later one sees the flag.
/// A thread that is inside holds an [`Inside`], taken with a look at the flag: by [`enter`]
/// (holding the GIL, before native code runs Python) or by [`detach`] (before it takes the GIL
/// back).
///
/// (CPython's `Py_IsFinalizing` would not do: it is not in the stable ABI before 3.13, and a
/// look at it before taking the GIL races the finalization's start.)
pub struct Inside(());

impl Drop for Inside {
    fn drop(&mut self) {
        INSIDE.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Counts this thread in (`None` if the exit has begun and this thread is not ending the
/// interpreter: then it must not run Python code or take the GIL).
fn inside() -> Option<Inside> {
    INSIDE.fetch_add(1, Ordering::SeqCst);
    if SHUTTING_DOWN.load(Ordering::SeqCst) && !ENDING.get() {
        INSIDE.fetch_sub(1, Ordering::SeqCst);
        return None;
    }
    Some(Inside(()))
}

/// For native code that holds the GIL and is about to run Python code (a callback, a module's
/// function) on a Python thread: `None` once the exit has begun (skip it: the interpreter is
/// ending). Holding the GIL, it cannot race the exit, which sets the flag holding it too.
pub fn enter(_py: Python<'_>) -> Option<Inside> {
    inside()
}

/// [`Python::detach`] for the threads of Python: runs `f` with the GIL released and takes it
/// back, unless the interpreter's exit has begun meanwhile: then the thread parks for good
/// instead (see [`Inside`]). The [`Inside`] it returns counts the thread until dropped: keep it
/// for as long as the native call may run Python code (an exception's constructor, say).
pub fn detach<T, F>(py: Python<'_>, f: F) -> (T, Inside)
where
    F: Send + FnOnce() -> T,
    T: Send,
{
    py.detach(move || {
        let value = f();
        match inside() {
            Some(inside) => (value, inside),
            None => park_for_good(),
        }
    })
}

/// For a thread whose call the interpreter's exit ended (stopped, or its result given back
/// before it was taken): the thread ending the interpreter gets an error (a call made after
/// the exit's give-back, from a later `atexit` handler); any other parks for good, the GIL
/// released, as if its call were never answered (the interpreter is ending).
pub fn ended(py: Python<'_>, inside: Inside) -> PyErr {
    if ENDING.get() {
        return PyRuntimeError::new_err(
            "fencelock has ended: the interpreter is exiting, and what it held was given back",
        );
    }
    drop(inside);
    py.detach(|| park_for_good());
    // (Never reached: the thread parks above.)
    PyRuntimeError::new_err("fencelock has ended: the interpreter is exiting")
}

/// A Python thread that must not take the GIL again: it never returns.
fn park_for_good() -> ! {
    loop {
        std::thread::park();
    }
}

/// Runs `f` attached to the interpreter (from a thread that may or may not hold the GIL),
/// unless the interpreter cannot take it: not initialized, or its exit begun (see [`Inside`]).
pub fn try_attach<R>(f: impl for<'py> FnOnce(Python<'py>) -> R) -> Option<R> {
    let _inside = inside()?;
    Python::try_attach(f)
}

/// After `fork()` in the child: the parent's end and its other threads are not here.
pub fn forked() {
    SHUTTING_DOWN.store(false, Ordering::SeqCst);
    INSIDE.store(0, Ordering::SeqCst);
}

/// Whether the exit has begun: nothing calls into Python any more.
pub fn shutting_down() -> bool {
    SHUTTING_DOWN.load(Ordering::SeqCst)
}

/// This thread runs the interpreter's exit: it finalizes the interpreter next and never parks.
pub fn ending_here() {
    ENDING.set(true);
}

/// The exit has begun: from now on no other thread takes the GIL from fencelock's code.
pub fn shut_down() {
    SHUTTING_DOWN.store(true, Ordering::SeqCst);
}

/// Whether some thread is still [`Inside`].
pub fn inside_now() -> bool {
    INSIDE.load(Ordering::SeqCst) > 0
}
