//! The `kafka-s3-archiver` binary: the command line is `commands::cli`; this adds the allocator.

kafka_s3_archiver::service_allocator!();

fn main() -> std::process::ExitCode {
    kafka_s3_archiver::commands::cli::main()
}
