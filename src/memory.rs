//! The allocator: jemalloc, in the `rebound` binary and in the benches that
//! run its code in-process (`rebound::use_jemalloc!()` at a program's root).
//! The `jemalloc` feature, on by default, brings it in; the fuzz targets build
//! the library without it and keep the system's allocator.
//!
//! Why not the system's (glibc's) malloc: most of a sidecar's allocations are
//! small and short-lived (an outcome's strings, its verdict), beside sessions
//! that live for minutes and are evicted in the order they were last used.
//! glibc coalesces every freed block with its neighbours (cold, for an evicted
//! session) and keeps the free holes until `malloc_trim` walks the heap.
//! Measured on this repository's benches (2 shared cores):
//! - `Observe` (`cargo bench --bench observe`, the service alone, 18 windows of
//!   each build in turns): a median 4.9 µs of CPU per outcome with glibc, 4.2 µs
//!   with jemalloc (about 335,000 and 405,000 outcomes a second); mimalloc read
//!   4.3 µs in an earlier round.
//! - memory (`cargo bench --bench sidecar_memory`): bytes per session 2,073 with
//!   glibc (one arena, `malloc_trim` every second) and 1,959 with jemalloc as
//!   configured here; at capacity 10,000, RSS after 10,000 to 300,000 sessions
//!   31.8-33.3 MiB and 32.9-34.2 MiB; idle 12.6 and 13.8 MiB. mimalloc read
//!   29.5 MiB idle (its arenas on transparent huge pages) and, without those,
//!   +17 % past the cap.
//!
//! The configuration (`JEMALLOC_CONF`) starts one jemalloc background thread,
//! which gives pages freed for a second back to the system, loaded or idle.
//! Without it, pages are given back only as the program allocates: an idle
//! sidecar kept its peak, 85 MiB for 30 s after the burst of
//! `tests/it/abuse.rs::an_idle_sidecar_gives_back_the_memory_of_a_burst`; with
//! it, the sidecar came back down within a second. `_RJEM_MALLOC_CONF` in the
//! environment overrides it option by option (jemalloc's `MALLOC_CONF` syntax);
//! an option jemalloc does not take stops the program before it starts, with
//! jemalloc's message naming it (`abort_conf`), rather than running on settings
//! nobody chose.

#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
pub use tikv_jemallocator::Jemalloc;

/// jemalloc's options as the sidecar runs it (see the module's documentation).
pub const JEMALLOC_CONF: &std::ffi::CStr =
    c"background_thread:true,max_background_threads:1,dirty_decay_ms:1000,abort_conf:true";

/// Makes jemalloc, configured as the sidecar runs it, the program's global
/// allocator. Invoke once, at the root of a binary or bench (not in a library).
/// Does nothing where jemalloc does not build (MSVC).
#[cfg(feature = "jemalloc")]
#[macro_export]
macro_rules! use_jemalloc {
    () => {
        #[cfg(not(target_env = "msvc"))]
        #[global_allocator]
        static ALLOCATOR: $crate::memory::Jemalloc = $crate::memory::Jemalloc;

        /// Read by jemalloc when it starts (before `main`): see `rebound::memory`.
        #[cfg(not(target_env = "msvc"))]
        #[allow(non_upper_case_globals)]
        #[export_name = "_rjem_malloc_conf"]
        static malloc_conf: Option<&'static std::ffi::c_char> =
            // SAFETY: a pointer to the first byte of a static, NUL-terminated string.
            Some(unsafe { &*$crate::memory::JEMALLOC_CONF.as_ptr() });
    };
}

/// Without the `jemalloc` feature, the program keeps the system's allocator.
#[cfg(not(feature = "jemalloc"))]
#[macro_export]
macro_rules! use_jemalloc {
    () => {};
}
