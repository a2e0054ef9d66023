//! The `rebound` binary: see `cli` for the commands.

fn main() -> std::process::ExitCode {
    rebound::cli::main()
}
