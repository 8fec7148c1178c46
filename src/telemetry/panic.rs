//! A panic anywhere ends the process at once, with a non-zero exit status. The archiver's work runs on
//! several threads (the Kafka consumer's, the pipeline's tasks, librdkafka's callbacks): a panic that
//! ended only its own thread would leave the rest running without it — nothing archived any more,
//! the partitions still held in the group, and a process that no longer obeys SIGTERM. Ending the
//! process instead hands its partitions to another instance (or to the restart), which recovers them
//! from the archive: nothing that was not archived is lost, it is read again.

/// The exit status after a panic (Rust's own for a panicking `main`).
pub const PANIC_EXIT_STATUS: i32 = 101;

/// Makes every later panic, on any thread, print its message and end the process at once.
pub fn exit_on_panic() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        let thread = std::thread::current();
        eprintln!(
            "error: a panic on thread {:?} stops the archiver now (exit status {PANIC_EXIT_STATUS}); what was not \
             archived yet is read again from Kafka once its partitions are recovered. Please report it with the \
             message above",
            thread.name().unwrap_or("unnamed")
        );
        // Not `std::process::exit`: its at-exit handlers (OpenSSL's) may meet librdkafka's threads still
        // running, and a process that hangs on its way out is what this hook is here to prevent.
        // SAFETY: `_exit` ends the process without touching its state.
        unsafe { libc::_exit(PANIC_EXIT_STATUS) }
    }));
}

#[cfg(test)]
mod tests {
    use std::process::Command;
    use std::time::{Duration, Instant};

    use super::*;

    /// Set in the process `a_panic_on_another_thread_ends_the_process_at_once` starts.
    const CHILD: &str = "KSA_PANIC_TEST_CHILD";

    #[test]
    fn a_panic_on_another_thread_ends_the_process_at_once() {
        let started = Instant::now();
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "telemetry::panic::tests::a_process_whose_worker_panics", "--ignored", "--nocapture"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(PANIC_EXIT_STATUS), "stdout:\n{stdout}\nstderr:\n{stderr}");
        assert!(stderr.contains("injected panic") && stderr.contains("on thread \"worker\""), "{stderr}");
        assert!(!stdout.contains("still running"), "{stdout}");
        assert!(started.elapsed() < Duration::from_secs(10), "it waited for the main thread");
    }

    /// The process the test above starts: a worker thread panics while the main thread goes on.
    #[test]
    #[ignore = "runs in a process of its own, started by a_panic_on_another_thread_ends_the_process_at_once"]
    fn a_process_whose_worker_panics() {
        if std::env::var_os(CHILD).is_none() {
            return;
        }
        exit_on_panic();
        std::thread::Builder::new().name("worker".into()).spawn(|| panic!("injected panic")).unwrap();
        std::thread::sleep(Duration::from_secs(15));
        println!("still running");
    }
}
