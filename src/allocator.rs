//! The service's allocator, as one macro for the binary and for the benches that measure code as the
//! service runs it: mimalloc instead of glibc's malloc (records are allocated on the consumer thread and
//! freed on the pipeline's, a pattern glibc serves slowly; see docs/performance.md), its arenas not
//! committed eagerly so that pages it frees go back to the OS (with its Linux default, peak RSS with
//! 1,000 partitions and the 256 MiB budget was 641–709 MiB instead of glibc's 405–438).

pub use libmimalloc_sys;
pub use mimalloc;

/// mimalloc's `arena_eager_commit` option, by its position in `mi_option_t` (the sys crate names none).
pub const MI_OPTION_ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// Installs the service's allocator in the crate it is expanded in (a binary, an example or a bench).
#[macro_export]
macro_rules! service_allocator {
    () => {
        #[global_allocator]
        static ALLOCATOR: $crate::allocator::mimalloc::MiMalloc = $crate::allocator::mimalloc::MiMalloc;

        /// Before the first allocation (a constructor, run before Rust's runtime starts).
        #[used]
        #[unsafe(link_section = ".init_array")]
        static RETURN_FREED_MEMORY: extern "C" fn() = {
            extern "C" fn return_freed_memory() {
                // SAFETY: stores a process-wide allocator option; nothing is allocated or freed by the call.
                unsafe {
                    $crate::allocator::libmimalloc_sys::mi_option_set(
                        $crate::allocator::MI_OPTION_ARENA_EAGER_COMMIT,
                        0,
                    )
                }
            }
            return_freed_memory
        };
    };
}
