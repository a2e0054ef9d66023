//! The `rebound` binary: see `cli` for the commands.

rebound::use_jemalloc!();

fn main() -> std::process::ExitCode {
    rebound::cli::main()
}
