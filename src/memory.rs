//! Freed memory back to the operating system. glibc's allocator keeps what a
//! program frees in its arenas (one per thread that allocated, up to eight per
//! core), for reuse; a sidecar that evicts sessions and drains metric samples
//! all day would hold pages of free holes near its peak, in every arena.
//! Two things keep RSS level past the session cap: one arena for the whole
//! process (threads still allocate small blocks from their own caches without
//! a lock), and `malloc_trim`, which gives the free pages of the arena back.
//!
//! Measured (`cargo bench --bench sidecar_memory`, capacity 10,000): RSS after
//! 100,000 sessions +20-24 % over 10,000 with glibc's default arenas and +15-18 %
//! with one, after 300,000 about 50 and 41 MiB; `Observe` throughput the same
//! within this machine's noise.

/// Puts every thread on one glibc arena, unless `MALLOC_ARENA_MAX` says
/// otherwise. Call it first in `main`, before any thread starts.
pub fn use_one_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if std::env::var_os("MALLOC_ARENA_MAX").is_some() {
            return;
        }
        const M_ARENA_MAX: std::os::raw::c_int = -8; // malloc.h
        unsafe extern "C" {
            fn mallopt(param: std::os::raw::c_int, value: std::os::raw::c_int) -> std::os::raw::c_int;
        }
        // SAFETY: mallopt takes no pointers; called before other threads exist.
        unsafe {
            mallopt(M_ARENA_MAX, 1);
        }
    }
}

/// Returns freed heap pages to the operating system (glibc only: other
/// allocators and platforms do their own, and this does nothing there).
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        unsafe extern "C" {
            fn malloc_trim(pad: usize) -> std::os::raw::c_int;
        }
        // SAFETY: malloc_trim takes no pointers and may run on any thread at any time.
        unsafe {
            malloc_trim(0);
        }
    }
}
