//! Freed memory back to the operating system. glibc's allocator keeps what a
//! program frees in its arenas (one per thread that allocated), for reuse; a
//! sidecar that evicts sessions and drains metric samples all day would hold
//! pages of free holes near its peak. `malloc_trim` gives the free pages of
//! every arena back (`madvise`), which keeps RSS level past the session cap.

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
