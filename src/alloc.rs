//! The allocator and its settings. mimalloc serves every allocation
//! (the binary installs it as the global allocator): the sweep and the store
//! allocate and free millions of small strings, and glibc's malloc kept
//! that memory and spent its time consolidating.
//!
//! mimalloc keeps freed pages for a while before it returns them to the
//! OS: 1 s by default in mimalloc v3, which `libmimalloc-sys` builds.
//! Measured (BENCHMARKS.md, "Freed memory"): at 10 ms, ingest keeps 90 % of
//! its throughput, the overload test's peak RSS falls from about 500 MiB to
//! about 315 MiB and a cold sweep's from 1.2 GiB to 1.0 GiB; at 0 the memory
//! falls further but ingest loses a quarter. So stormwatch makes 10 ms the
//! default, and an operator's `MIMALLOC_PURGE_DELAY` (mimalloc's own
//! variable, in milliseconds) still wins.
//!
//! mimalloc is built without its transparent-huge-page advice
//! (`libmimalloc-sys`'s `no_thp` feature, in Cargo.toml). By default it
//! asks the kernel (`madvise(MADV_HUGEPAGE)`) to back its arenas with 2 MiB
//! pages; on a kernel whose THP setting is `madvise` (Debian's and Ubuntu's
//! default) every 2 MiB stretch it touched was then resident whole, while
//! it returns memory 64 KiB at a time: under the overload test 92-142 MiB
//! of the RSS was huge pages, and the peak's median fell from about 340 to
//! about 270 MiB without them (BENCHMARKS.md, "Overload"). On a kernel set
//! to `always`, huge pages come without being asked; `MIMALLOC_ALLOW_THP=0`
//! turns them off for the process there.
//!
//! This is the crate's one `unsafe` block outside tests: a call into
//! mimalloc's C API, which the Rust crate does not wrap (the test reads the
//! option back through the same API).

/// The default purge delay, in milliseconds.
pub const PURGE_DELAY_MS: std::ffi::c_long = 10;

/// mimalloc's option index for the purge delay. `libmimalloc-sys` names
/// the options around it but not this one; `mimalloc.h` (v3) declares
/// `mi_option_purge_delay` immediately before `mi_option_use_numa_nodes`.
/// The test below checks the index reads the purge delay's documented
/// default before it is set.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t =
    libmimalloc_sys::mi_option_use_numa_nodes - 1;

/// Make [`PURGE_DELAY_MS`] mimalloc's default purge delay, unless
/// `MIMALLOC_PURGE_DELAY` is set (mimalloc reads it and keeps it). Call it
/// first thing in `main`, before any thread starts.
#[allow(unsafe_code)]
pub fn purge_freed_memory_promptly() {
    // SAFETY: `mi_option_set_default` takes two integers and no pointers,
    // and checks the option index against its table before using it. Its
    // documentation calls it "not thread safe" (it writes the option's
    // value without a lock): it is called from `main` before any thread
    // exists, and nothing else in stormwatch sets mimalloc options. It
    // changes the value only where the option was not initialized from the
    // environment, so `MIMALLOC_PURGE_DELAY` keeps precedence.
    unsafe {
        libmimalloc_sys::mi_option_set_default(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS);
    }
}

/// The purge delay mimalloc runs with now, in milliseconds.
#[cfg(test)]
#[allow(unsafe_code)]
fn purge_delay_ms() -> std::ffi::c_long {
    // SAFETY: `mi_option_get` takes an integer, checks it against its
    // table, and reads one value (reading the environment the first time).
    unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The index is the purge delay's: it reads mimalloc v3's documented
    /// default (1000 ms) until set, then the value set. (The test binaries
    /// run with `MIMALLOC_PURGE_DELAY` unset; no other test touches it.)
    #[test]
    fn the_purge_delay_defaults_to_ten_milliseconds() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        assert_eq!(purge_delay_ms(), 1000);
        purge_freed_memory_promptly();
        assert_eq!(purge_delay_ms(), PURGE_DELAY_MS);
    }
}
