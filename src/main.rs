//! The `rebound` binary: see `cli` for the commands.

fn main() -> std::process::ExitCode {
    rebound::memory::use_one_arena();
    rebound::cli::main()
}
